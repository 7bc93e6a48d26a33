//! Where surrogates are mined and counted: on the CPU ([`CpuCounter`], several surrogates at
//! once on rayon's pool), or on the GPUs ([`GpuCounter`], one surrogate at a time, each batch
//! of candidates split across every GPU). Counts are exact either way, so the p-values do not
//! depend on the choice (`tests/significance_gpu.rs` checks them equal on a GPU host).
//!
//! A surrogate is generated on the host (a pure function of the seed and its index,
//! [`super::surrogate`]) and uploaded once per pass; on the GPU the level-wise mining and the
//! counts of the tested union run on the device.

use parking_lot::Mutex;

use crate::device::{DeviceChoice, DeviceError};
use crate::episode::{
    CountKind, Counter, CpuCounter, Episode, GpuCounter, GpuSettings, MinerConfig, NoProgress,
    mine_with, select_gpu,
};
use crate::event::EventStream;

use super::testing::SignificanceError;

/// A GPU counter the engine made or one lent by the caller (a pipeline stage's).
pub(crate) enum GpuSlot<'g> {
    /// Made for this test.
    Owned(Box<GpuCounter>),
    /// The caller's (reloaded with each surrogate: reload it with its own stream after).
    Lent(&'g mut GpuCounter),
}

impl GpuSlot<'_> {
    fn get(&mut self) -> &mut GpuCounter {
        match self {
            Self::Owned(g) => g,
            Self::Lent(g) => g,
        }
    }
}

/// The counter surrogates are mined and counted with.
pub(crate) enum Engine<'g> {
    /// [`CpuCounter`] per surrogate; surrogates in parallel.
    Cpu,
    /// One [`GpuCounter`], reloaded with each surrogate.
    Gpu(Mutex<GpuSlot<'g>>),
}

impl<'g> Engine<'g> {
    /// The engine on a GPU counter the caller lends.
    pub(crate) fn lent(gpu: &'g mut GpuCounter) -> Self {
        Self::Gpu(Mutex::new(GpuSlot::Lent(gpu)))
    }

    /// The engine `choice` gives for mining `stream` with `config` (`auto`: the GPUs when
    /// there are any).
    ///
    /// # Errors
    /// [`DeviceError`] for `gpu` without a usable GPU.
    pub(crate) fn new(
        stream: &EventStream,
        config: &MinerConfig,
        choice: DeviceChoice,
        settings: &GpuSettings,
    ) -> Result<Self, DeviceError> {
        if choice == DeviceChoice::Cpu {
            return Ok(Self::Cpu);
        }
        Ok(
            match select_gpu(stream, &config.intervals, choice, settings)? {
                Some(gpu) => Self::Gpu(Mutex::new(GpuSlot::Owned(Box::new(gpu)))),
                None => Self::Cpu,
            },
        )
    }

    /// True when surrogates should be processed in parallel (the CPU); the GPU takes one at a
    /// time and parallelises inside.
    pub(crate) fn parallel(&self) -> bool {
        matches!(self, Self::Cpu)
    }

    /// The frequent episodes of two or more nodes of `x` mined with `config`, with counts.
    pub(crate) fn mine(
        &self,
        x: &EventStream,
        config: &MinerConfig,
    ) -> Result<Vec<(Episode, u64)>, SignificanceError> {
        let result = match self {
            Self::Cpu => mine_with(x, config, &CpuCounter::new(x), &NoProgress)?,
            Self::Gpu(gpu) => {
                let mut slot = gpu.lock();
                let gpu = slot.get();
                gpu.reload(x)?;
                mine_with(x, config, &*gpu, &NoProgress)?
            }
        };
        Ok(result
            .episodes
            .into_iter()
            .filter(|f| f.episode.len() >= 2)
            .map(|f| (f.episode, f.count))
            .collect())
    }

    /// The exact counts of `list` in `x`.
    pub(crate) fn count(
        &self,
        x: &EventStream,
        list: &[Episode],
    ) -> Result<Vec<u64>, SignificanceError> {
        if list.is_empty() {
            return Ok(Vec::new());
        }
        Ok(match self {
            Self::Cpu => CpuCounter::new(x).count(CountKind::Exact, list)?,
            Self::Gpu(gpu) => {
                let mut slot = gpu.lock();
                let gpu = slot.get();
                gpu.reload(x)?;
                gpu.count(CountKind::Exact, list)?
            }
        })
    }
}

impl Engine<'_> {
    /// `f(s)` for every surrogate `s < n`, in order: in parallel on the CPU, one after the
    /// other on the GPU.
    pub(crate) fn map_surrogates<T: Send>(
        &self,
        n: usize,
        f: impl Fn(u64) -> Result<T, SignificanceError> + Sync + Send,
    ) -> Result<Vec<T>, SignificanceError> {
        use rayon::prelude::*;
        if self.parallel() {
            (0..n as u64).into_par_iter().map(f).collect()
        } else {
            (0..n as u64).map(f).collect()
        }
    }

    /// Folds `f(s)` over every surrogate `s < n` into `zero` with `add` (partial folds joined
    /// by `merge` on the CPU, where surrogates run in parallel), so that per-surrogate results
    /// are never all held at once.
    pub(crate) fn fold_surrogates<T: Send, A: Clone + Send + Sync>(
        &self,
        n: usize,
        zero: A,
        f: impl Fn(u64) -> Result<T, SignificanceError> + Sync + Send,
        add: impl Fn(A, T) -> A + Sync + Send,
        merge: impl Fn(A, A) -> A + Sync + Send,
    ) -> Result<A, SignificanceError> {
        use rayon::prelude::*;
        if self.parallel() {
            (0..n as u64)
                .into_par_iter()
                .map(f)
                .try_fold(|| zero.clone(), |acc, x| x.map(|x| add(acc, x)))
                .try_reduce(|| zero.clone(), |a, b| Ok(merge(a, b)))
        } else {
            let mut acc = zero;
            for s in 0..n as u64 {
                acc = add(acc, f(s)?);
            }
            Ok(acc)
        }
    }
}
