//! The GPU fast path: the distance dynamic program of Eqs. 6–7 (Algorithm 4) and the bounded
//! split scan as CUDA kernels (`kernels/shapelet.cu`, driven through one device thread by
//! `device::shapelet`), and the choice of path for `--device auto|cpu|gpu`.
//!
//! Layout, differing from the paper's thread-per-start block per `(i, l)` where that helps:
//! * **persistent warps** (the paper's §V-C persistent blocks): as many warps as the GPU keeps
//!   resident and the scratch budget allows take work items from an atomic counter, so memory
//!   is bounded by the number of warps, not by the number of candidates;
//! * a work item is (candidate series, 32 consecutive starts, 8 consecutive lengths); lane `i`
//!   owns start `s0 + i` and walks the target's windows, taking `Ω(s−1, u−1)` from lane `i − 1`
//!   by a register shuffle instead of the paper's shared-memory buffer and barrier per step;
//!   the block's first row and every lane's first column carry over from one length to the
//!   next by adding the new terms, so no cell needs a dot product;
//! * each lane then sorts its candidate's `N` distance intervals and scans the splits on the
//!   device; `G*`, `gap*` and the contenders are reduced on the device, and only the
//!   contenders come back to the host, which measures them canonically
//!   ([`super::discovery::discover`]). The GPU's statistics and gains are the host's bit for
//!   bit, so the answer is the CPU's.
//!
//! A node with more than `device::shapelet::POOL_CAPACITY` contenders is searched on the CPU.

use std::sync::Arc;

use super::discovery::{Candidate, Contender, Contenders, CpuSearch, Op, Pool, Problem, Search};
use super::split::FastRecord;
use super::{ShapeletError, TrainingSet};
use crate::device::shapelet::{NodeJob, ShapeletSeries};
use crate::device::{DeviceChoice, DeviceError, DeviceTarget, SharedWorker};

/// Shapelet discovery on one GPU (see [`Search`]).
pub struct GpuSearch {
    worker: SharedWorker,
    /// Identity of the uploaded training set: data address, `N * L`, `L`, first and last bits.
    loaded: Option<(usize, usize, usize, u64, u64)>,
    /// Kernel milliseconds (CUDA events) of all nodes so far.
    pub kernel_ms: f64,
    /// Search launches so far.
    pub launches: u64,
}

impl std::fmt::Debug for GpuSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSearch")
            .field("device", &self.worker.info().name)
            .field("kernel_ms", &self.kernel_ms)
            .finish_non_exhaustive()
    }
}

fn identity(set: &TrainingSet) -> (usize, usize, usize, u64, u64) {
    (
        set.values.as_ptr() as usize,
        set.values.len(),
        set.length,
        set.values.first().map_or(0, |v| v.to_bits()),
        set.values.last().map_or(0, |v| v.to_bits()),
    )
}

impl GpuSearch {
    /// Takes the process-wide device thread of the first GPU (for the life of the search).
    ///
    /// # Errors
    /// [`DeviceError`] when there is no usable GPU.
    pub fn start() -> Result<Self, DeviceError> {
        Self::start_on(None)
    }

    /// Takes the process-wide device thread of GPU `gpu` (a CUDA ordinal; `None`: the first
    /// GPU) for the life of the search.
    ///
    /// # Errors
    /// [`DeviceError`] when there is no usable GPU, or no GPU `gpu`.
    pub fn start_on(gpu: Option<usize>) -> Result<Self, DeviceError> {
        Ok(Self {
            worker: crate::device::shared_worker(gpu)?,
            loaded: None,
            kernel_ms: 0.0,
            launches: 0,
        })
    }

    fn ensure_loaded(&mut self, set: &TrainingSet) -> Result<(), DeviceError> {
        let id = identity(set);
        if self.loaded != Some(id) {
            self.loaded = None;
            self.worker
                .shapelet_load(Arc::new(ShapeletSeries {
                    values: set.values.clone(),
                    len: set.length,
                }))
                .wait()?;
            self.loaded = Some(id);
        }
        Ok(())
    }

    /// The device job of `node`.
    fn job(node: &Problem<'_>) -> Result<NodeJob, DeviceError> {
        let u = |what: &str, v: usize| {
            u32::try_from(v).map_err(|_| DeviceError::Unsupported(format!("{what} = {v}")))
        };
        Ok(NodeJob {
            subset: node
                .subset
                .iter()
                .map(|&j| u("series index", j))
                .collect::<Result<_, _>>()?,
            classes: node
                .classes
                .iter()
                .map(|&c| u("class id", c))
                .collect::<Result<_, _>>()?,
            totals: node.totals.clone(),
            lengths: node
                .lengths
                .iter()
                .map(|&l| u("length", l))
                .collect::<Result<_, _>>()?,
            xlogx: node.table.values().to_vec(),
            h_total: node.table.total_term(&node.totals),
            xmax: node
                .subset
                .iter()
                .map(|&j| {
                    node.set
                        .series(j)
                        .iter()
                        .fold(0.0f64, |m, v| m.max(v.abs()))
                })
                .collect(),
            base: node.base.map(|(op, b)| {
                (
                    match op {
                        Op::And => 1,
                        Op::Or => 2,
                    },
                    b.to_vec(),
                )
            }),
        })
    }
}

impl Search for GpuSearch {
    fn contenders(&mut self, node: &Problem<'_>) -> Result<Contenders, ShapeletError> {
        self.ensure_loaded(node.set)?;
        let report = self
            .worker
            .shapelet_node(Arc::new(Self::job(node)?))
            .wait()?;
        self.kernel_ms += report.kernel_ms;
        self.launches += u64::from(report.launches);
        if report.overflow {
            tracing::warn!(
                series = node.subset.len(),
                "More shapelet contenders than the GPU pool holds; this node is searched on the CPU."
            );
            return CpuSearch::default().contenders(node);
        }
        let mut pool = Pool::default();
        pool.absorb(
            report
                .entries
                .iter()
                .map(|e| Contender {
                    candidate: Candidate {
                        series: e.series as usize,
                        start: e.start as usize,
                        length: e.length as usize,
                    },
                    record: FastRecord {
                        g_safe: e.record[0],
                        gap_lo: e.record[1],
                        gap_hi: e.record[2],
                        g_up: e.record[3],
                    },
                })
                .collect(),
        );
        Ok(Contenders {
            entries: pool.entries,
            candidates: node.candidates(),
        })
    }

    fn device(&self) -> String {
        self.worker.info().name.clone()
    }
}

/// `--device auto`: the GPU while it works, then the CPU (one log line when it switches).
struct AutoSearch {
    gpu: Option<GpuSearch>,
    cpu: CpuSearch,
}

impl Search for AutoSearch {
    fn contenders(&mut self, node: &Problem<'_>) -> Result<Contenders, ShapeletError> {
        if let Some(g) = &mut self.gpu {
            match g.contenders(node) {
                Ok(c) => return Ok(c),
                Err(e) => {
                    tracing::warn!(error = %e, "The GPU failed; shapelet discovery goes on on the CPU.");
                    self.gpu = None;
                }
            }
        }
        self.cpu.contenders(node)
    }

    fn device(&self) -> String {
        self.gpu
            .as_ref()
            .map_or_else(|| "cpu".into(), Search::device)
    }
}

/// The fast path for `device`: the CPU; the GPU (an error without one); or `Auto`, the GPU
/// when one is usable, else the CPU with one log line. A [`DeviceTarget`] also names the GPU.
///
/// # Errors
/// [`ShapeletError::Device`] for `Gpu` without a usable GPU.
pub fn select(device: impl Into<DeviceTarget>) -> Result<Box<dyn Search>, ShapeletError> {
    let target = device.into();
    Ok(
        match target.resolve("shapelet discovery", GpuSearch::start_on)? {
            None => Box::new(CpuSearch::default()),
            Some(g) if target.choice == DeviceChoice::Auto => Box::new(AutoSearch {
                gpu: Some(g),
                cpu: CpuSearch::default(),
            }),
            Some(g) => Box::new(g),
        },
    )
}
