//! The GPU counting back end: candidates split evenly across the device threads (one per GPU,
//! paper §6.2), PreElim for the first pass, PTPE or MTPE for exact counts chosen per GPU by the
//! hybrid rule (Algorithm 2, Eq. 3, calibrated per device), and an exact CPU recount of every
//! candidate whose per-state lists overflowed on the GPU. Any device failure switches this
//! counter to the CPU reference with one warning; a count is never guessed.
//!
//! # References
//! Cao et al. §5.1 (PTPE, MTPE, hybrid), §5.2 (PreElim, two-pass), §6 (multi-GPU device
//! threads).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};

use parking_lot::Mutex;
use rayon::prelude::*;

use crate::device::kernels::{COUNT_OVERFLOW, MAX_GPU_NODES};
use crate::device::{
    CandidateBatch, DeviceChoice, DeviceError, DeviceInfo, EndsJob, EpisodeKernel, EpisodeWorker,
    StreamData, StreamReport, SurrogateJob,
};
use crate::episode::calibrate::{self, KernelTimer, Plan};
use crate::episode::count::TypeIndex;
use crate::episode::counter::{CountError, CountKind, Counter, CpuCounter, prefix_order};
use crate::episode::ends::gap_of;
use crate::episode::hybrid::{Calibration, ExactAlgorithm, UNCALIBRATED_PENALTY};
use crate::episode::model::{Episode, Interval};
use crate::episode::mtpe::Segments;
use crate::event::EventStream;

/// Running totals of a [`GpuCounter`], for reports and benchmarks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuStats {
    /// Candidates counted on the GPUs.
    pub gpu_candidates: u64,
    /// PTPE candidates whose lists overflowed and were recounted on the CPU.
    pub overflow_recounts: u64,
    /// Candidates counted on the CPU because the GPU path could not take them (length > 16,
    /// an interval outside the uploaded table) or a device failed.
    pub cpu_fallback: u64,
    /// Sum of kernel times (CUDA events), milliseconds, over all devices.
    pub kernel_ms: f64,
    /// Candidates counted with one thread each (PTPE mapping; PreElim or exact).
    pub ptpe_candidates: u64,
    /// Candidates counted with threads per segment (MTPE mapping; PreElim or exact).
    pub mtpe_candidates: u64,
    /// Candidates counted exactly from their prefixes' occurrence ends
    /// ([`ExactAlgorithm::Ends`]).
    pub ends_candidates: u64,
}

impl GpuStats {
    /// Applies `f` to each pair of fields of `self` and `other` (the counts, then the kernel
    /// time).
    fn zip(&self, other: &Self, f: impl Fn(u64, u64) -> u64, g: impl Fn(f64, f64) -> f64) -> Self {
        Self {
            gpu_candidates: f(self.gpu_candidates, other.gpu_candidates),
            overflow_recounts: f(self.overflow_recounts, other.overflow_recounts),
            cpu_fallback: f(self.cpu_fallback, other.cpu_fallback),
            kernel_ms: g(self.kernel_ms, other.kernel_ms),
            ptpe_candidates: f(self.ptpe_candidates, other.ptpe_candidates),
            mtpe_candidates: f(self.mtpe_candidates, other.mtpe_candidates),
            ends_candidates: f(self.ends_candidates, other.ends_candidates),
        }
    }

    /// The totals of two counters together, field by field.
    #[must_use]
    pub(crate) fn plus(&self, other: &Self) -> Self {
        self.zip(other, u64::saturating_add, |a, b| a + b)
    }

    /// What these running totals gained since `earlier`, a snapshot of the same counter's
    /// (or counters') totals, field by field.
    #[must_use]
    pub(crate) fn since(&self, earlier: &Self) -> Self {
        self.zip(earlier, u64::saturating_sub, |a, b| a - b)
    }
}

/// MTPE aims at this many threads per resident PTPE thread slot (several waves keep every
/// multiprocessor busy while the slowest segments finish); [`GpuCounter::set_mtpe_threads_per_slot`]
/// changes it.
pub const MTPE_THREADS_PER_SLOT: u64 = 4;
/// Segments hold at least this many of the stream's events (R is capped accordingly).
const MIN_SEGMENT_EVENTS: usize = 512;
/// At most this many segments.
const MAX_SEGMENTS: usize = 4096;

/// What the CPU counts for a [`GpuCounter`] (overflows, candidates the kernels do not take,
/// everything after a device failure) is counted in: the uploaded stream's index (shared with
/// [`GpuCounter::recording`], and with every counter the caller reloaded with the same one),
/// or for a surrogate generated on the device the same surrogate made on the host on first
/// need.
struct HostCopy {
    ready: std::sync::OnceLock<Arc<CpuCounter>>,
    make: Option<Arc<dyn Fn() -> EventStream + Send + Sync>>,
}

impl HostCopy {
    /// The uploaded stream's index, already built.
    fn shared(index: Arc<CpuCounter>) -> Self {
        Self {
            ready: std::sync::OnceLock::from(index),
            make: None,
        }
    }

    fn get(&self) -> &CpuCounter {
        self.ready.get_or_init(|| {
            let make = self.make.as_ref().expect("a host copy or its maker");
            Arc::new(CpuCounter::new(&make()))
        })
    }
}

/// Counts candidates on one or more GPUs, each owned by an `EpisodeWorker` thread.
pub struct GpuCounter {
    workers: Vec<EpisodeWorker>,
    cpu: HostCopy,
    /// The host index of the stream uploaded last by [`GpuCounter::reload`] (its events per
    /// type are what a surrogate keeps, for [`Counter::events_touched`]); shared with `cpu`
    /// while that stream is counted, and with other counters reloaded with the same index.
    recording: Arc<CpuCounter>,
    intervals: Vec<Interval>,
    algorithm: Mutex<ExactAlgorithm>,
    forced_segments: Mutex<Option<Arc<[f64]>>>,
    mtpe_threads_per_slot: AtomicU64,
    /// Per worker: the calibration of its device model, if one was found.
    calibrations: Vec<Option<Calibration>>,
    /// Segment boundaries for R = 1, 2, 4, … (index log2 R).
    segment_sets: Vec<Arc<[f64]>>,
    failed: AtomicBool,
    stats: Mutex<GpuStats>,
    uploads: Vec<StreamReport>,
}

impl std::fmt::Debug for GpuCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuCounter")
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl GpuCounter {
    /// Starts one device thread per entry of `gpus` (ordinals; an ordinal may repeat, which
    /// gives that GPU several workers), uploads `stream` grouped by type and the interval table
    /// to each, and keeps them for the life of the counter. Device threads are pinned to cores
    /// `0, 1, …` in order.
    ///
    /// # Errors
    /// [`DeviceError`] if a worker cannot start or the upload fails.
    pub fn new(
        stream: &EventStream,
        intervals: &[Interval],
        gpus: &[usize],
    ) -> Result<Self, DeviceError> {
        Self::start(stream, None, intervals, gpus, true, Some(0))
    }

    /// [`GpuCounter::new`] sharing `recording`, the host index of `stream`
    /// (`CpuCounter::new(stream)`), instead of building one: several counters of one stream
    /// (the significance engine's) then hold one host copy of it between them.
    ///
    /// # Errors
    /// As [`GpuCounter::new`]; [`DeviceError::Unsupported`] when `recording` holds another
    /// number of events or types than `stream`.
    pub fn new_shared(
        stream: &EventStream,
        recording: Arc<CpuCounter>,
        intervals: &[Interval],
        gpus: &[usize],
    ) -> Result<Self, DeviceError> {
        Self::start(stream, Some(recording), intervals, gpus, true, Some(0))
    }

    /// [`GpuCounter::new`] (with `recording`: [`GpuCounter::new_shared`]); with `calibrate`,
    /// each device model's crossover table is found ([`calibrate::resolve`]: cached, shipped,
    /// or measured once on first use), else none (`f(N) = 1`, for the first-use measurement
    /// itself). Device thread `i` is pinned to core `(first_core + i) % cores` (`cores` the
    /// host's available parallelism), or to none without `first_core`.
    fn start(
        stream: &EventStream,
        recording: Option<Arc<CpuCounter>>,
        intervals: &[Interval],
        gpus: &[usize],
        calibrate: bool,
        first_core: Option<usize>,
    ) -> Result<Self, DeviceError> {
        if gpus.is_empty() {
            return Err(DeviceError::NoDevices);
        }
        if let Some(r) = &recording {
            check_index(stream, r)?;
        }
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let mut seen: HashMap<usize, usize> = HashMap::new();
        let mut workers = Vec::with_capacity(gpus.len());
        for (i, &ordinal) in gpus.iter().enumerate() {
            let slot = seen.entry(ordinal).or_insert(0);
            let core = first_core.map(|c| (c + i) % cores);
            workers.push(EpisodeWorker::start(ordinal, *slot, core)?);
            *slot += 1;
        }
        let calibrations = workers
            .iter()
            .map(|w| {
                let info = w.info();
                if !calibrate {
                    return None;
                }
                calibrate::resolve(&info.name, info.compute_capability, None, || {
                    first_use_calibration(info.ordinal)
                })
            })
            .collect();
        let recording = recording.unwrap_or_else(|| Arc::new(CpuCounter::new(stream)));
        let mut counter = Self {
            workers,
            cpu: HostCopy::shared(Arc::clone(&recording)),
            recording: Arc::clone(&recording),
            intervals: intervals.to_vec(),
            algorithm: Mutex::new(ExactAlgorithm::Hybrid),
            forced_segments: Mutex::new(None),
            mtpe_threads_per_slot: AtomicU64::new(MTPE_THREADS_PER_SLOT),
            calibrations,
            segment_sets: Vec::new(),
            failed: AtomicBool::new(false),
            stats: Mutex::new(GpuStats::default()),
            uploads: Vec::new(),
        };
        counter.reload_shared(stream, recording)?;
        Ok(counter)
    }

    /// Replaces the stream on every device, keeping the device threads and their contexts
    /// (sliding windows of a live stream: one upload per window, no context re-creation).
    /// Builds the stream's host index once ([`GpuCounter::reload_shared`] takes one built
    /// already).
    ///
    /// # Errors
    /// [`DeviceError`] if an upload fails; the counter must then not be used.
    pub fn reload(&mut self, stream: &EventStream) -> Result<(), DeviceError> {
        self.reload_shared(stream, Arc::new(CpuCounter::new(stream)))
    }

    /// [`GpuCounter::reload`] with `recording`, the host index of `stream`
    /// (`CpuCounter::new(stream)`), shared instead of built: the counter's CPU counts and
    /// [`Counter::events_touched`] read it, and so may any other counter given the same
    /// `Arc` (one host copy of a recording for all of them). Only the number of events and
    /// types are checked against `stream`; an index of another stream of the same sizes would
    /// give wrong CPU counts.
    ///
    /// # Errors
    /// [`DeviceError::Unsupported`] when `recording` holds another number of events or types
    /// than `stream`; [`DeviceError`] if an upload fails, after which the counter must not be
    /// used.
    pub fn reload_shared(
        &mut self,
        stream: &EventStream,
        recording: Arc<CpuCounter>,
    ) -> Result<(), DeviceError> {
        check_index(stream, &recording)?;
        let data = Arc::new(stream_data(recording.index(), &self.intervals)?);
        let tickets: Vec<_> = self
            .workers
            .iter()
            .map(|w| w.load_stream(data.clone()))
            .collect();
        let uploads = tickets
            .into_iter()
            .map(|t| t.wait())
            .collect::<Result<Vec<_>, _>>()?;
        drop(data);
        for (w, u) in self.workers.iter().zip(&uploads) {
            tracing::debug!(
                worker = w.name(),
                gpu = %w.info().name,
                uploaded_bytes = u.bytes,
                device_used_bytes = u.device_used,
                "Event stream uploaded."
            );
        }
        let mut segment_sets = Vec::new();
        let mut r = 1usize;
        loop {
            segment_sets.push(Arc::from(Segments::by_events(stream.times(), r).bounds()));
            r *= 2;
            if r > MAX_SEGMENTS || stream.len() / r < MIN_SEGMENT_EVENTS {
                break;
            }
        }
        self.cpu = HostCopy::shared(Arc::clone(&recording));
        self.recording = recording;
        self.segment_sets = segment_sets;
        self.uploads = uploads;
        Ok(())
    }

    /// The host index of the stream uploaded last by [`GpuCounter::reload`] (the recording a
    /// device-generated surrogate is made from), to share with other counters of the same
    /// stream ([`GpuCounter::new_shared`], [`GpuCounter::reload_shared`]).
    #[must_use]
    pub fn recording(&self) -> &Arc<CpuCounter> {
        &self.recording
    }

    /// Replaces the counted stream on every device by surrogate `job` of the stream uploaded
    /// last by [`GpuCounter::reload`] (the recording), generated on the devices from it: no
    /// upload (`kernels/surrogates.cu`, the host's surrogates bit for bit). `host` makes the
    /// same surrogate on the host; it is called only if the CPU must count part of it (a
    /// list overflow, a device failure). The method must keep every unit's spike count
    /// (dithering and shifting do), so the MTPE segments and [`Counter::events_touched`] of
    /// the recording still apply. [`GpuCounter::reload`] brings the recording back.
    ///
    /// # Errors
    /// [`DeviceError`] if a device fails; the counter must then not be used.
    pub fn load_surrogate(
        &mut self,
        job: SurrogateJob,
        host: Arc<dyn Fn() -> EventStream + Send + Sync>,
    ) -> Result<(), DeviceError> {
        let tickets: Vec<_> = self
            .workers
            .iter()
            .map(|w| w.load_surrogate(job.clone()))
            .collect();
        for t in tickets {
            t.wait()?;
        }
        self.cpu = HostCopy {
            ready: std::sync::OnceLock::new(),
            make: Some(host),
        };
        Ok(())
    }

    /// The device worker `which % devices` (a counter has a worker on every GPU it uses),
    /// for jobs that other domains run on the counter's devices
    /// (`significance::gpu`: the `spectrum` search's one-floor pass, batch counts); the
    /// counted stream is theirs to leave as it is.
    #[must_use]
    pub(crate) fn worker(&self, which: usize) -> &EpisodeWorker {
        &self.workers[which % self.workers.len()]
    }

    /// Adds `candidates` counted from their prefixes' ends in `kernel_ms` of kernel time (a
    /// job run on [`GpuCounter::worker`]) to the running totals ([`GpuStats::ends_candidates`],
    /// [`GpuStats::kernel_ms`]).
    pub(crate) fn record_ends(&self, candidates: u64, kernel_ms: f32) {
        let mut stats = self.stats.lock();
        stats.ends_candidates += candidates;
        stats.kernel_ms += f64::from(kernel_ms);
    }

    /// Number of device workers (one per GPU it counts on).
    #[must_use]
    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// The counted stream's times on the first device, grouped by type (for tests).
    ///
    /// # Errors
    /// [`DeviceError`] if the download fails.
    pub fn device_times(&self) -> Result<Vec<f64>, DeviceError> {
        self.workers[0].stream_times().wait()
    }

    /// The devices, one entry per worker.
    #[must_use]
    pub fn devices(&self) -> Vec<DeviceInfo> {
        self.workers.iter().map(|w| w.info().clone()).collect()
    }

    /// Device memory in use after the stream upload, bytes, per worker.
    #[must_use]
    pub fn device_memory_used(&self) -> Vec<usize> {
        self.uploads.iter().map(|u| u.device_used).collect()
    }

    /// Totals so far.
    #[must_use]
    pub fn stats(&self) -> GpuStats {
        self.stats.lock().clone()
    }

    /// Resets the totals.
    pub fn reset_stats(&self) {
        *self.stats.lock() = GpuStats::default();
    }

    /// Chooses the exact kernel: PTPE, MTPE, or the hybrid rule (the default).
    pub fn set_exact_algorithm(&self, algorithm: ExactAlgorithm) {
        *self.algorithm.lock() = algorithm;
    }

    /// MTPE segments to use for every batch instead of the automatic choice (`None`: back to
    /// automatic). For tests and calibration.
    pub fn set_mtpe_segments(&self, segments: Option<&Segments>) {
        *self.forced_segments.lock() = segments.map(|s| Arc::from(s.bounds()));
    }

    /// MTPE's target threads per resident slot (default [`MTPE_THREADS_PER_SLOT`], at least
    /// 1): more segments hide latency, fewer cost less per segment. For `synfire bench`.
    pub fn set_mtpe_threads_per_slot(&self, threads: u64) {
        self.mtpe_threads_per_slot
            .store(threads.max(1), AtomicOrdering::Relaxed);
    }

    /// Uses `calibration` for every device (instead of the stored per-model files).
    pub(crate) fn set_calibration(&mut self, calibration: &Calibration) {
        for c in &mut self.calibrations {
            *c = Some(calibration.clone());
        }
    }

    /// Reads a calibration file and uses it for every device.
    ///
    /// # Errors
    /// [`crate::episode::hybrid::CalibrationError`] naming the file.
    pub fn load_calibration(
        &mut self,
        path: &Path,
    ) -> Result<(), crate::episode::hybrid::CalibrationError> {
        let c = Calibration::load(path)?;
        self.set_calibration(&c);
        Ok(())
    }

    /// PTPE threads worker `w`'s GPU runs at once for `nodes`-node episodes (`MP × B_MP × T_B`).
    ///
    /// # Panics
    /// If `w` is not a worker index.
    #[must_use]
    pub(crate) fn resident_threads(&self, w: usize, nodes: usize) -> u64 {
        self.workers[w].ptpe_resident_threads(nodes)
    }

    /// Eq. 3 for worker `w` counting `share` episodes of `nodes` nodes: PTPE when
    /// `share > MP × B_MP × T_B × f(N)`.
    #[must_use]
    pub(crate) fn prefers_ptpe(&self, w: usize, nodes: usize, share: usize) -> bool {
        let resident = self.workers[w].ptpe_resident_threads(nodes) as f64;
        let f = self.calibrations[w]
            .as_ref()
            .map_or_else(|| UNCALIBRATED_PENALTY.at(nodes), |c| c.penalty(nodes));
        share as f64 > resident * f
    }

    /// MTPE segments for worker `w` counting `share` episodes of `nodes` nodes: about
    /// [`MTPE_THREADS_PER_SLOT`] threads per resident slot, R a power of two, each segment
    /// holding at least [`MIN_SEGMENT_EVENTS`] events.
    fn segments_for(&self, w: usize, nodes: usize, share: usize) -> Arc<[f64]> {
        if let Some(forced) = self.forced_segments.lock().as_ref() {
            return forced.clone();
        }
        let slots = self.workers[w].ptpe_resident_threads(nodes).max(1)
            * self.mtpe_threads_per_slot.load(AtomicOrdering::Relaxed);
        let want = slots.div_ceil(share.max(1) as u64).next_power_of_two();
        let log = (want.trailing_zeros() as usize).min(self.segment_sets.len() - 1);
        self.segment_sets[log].clone()
    }

    /// The kernel worker `w` uses for `share` episodes of `nodes` nodes: one thread per
    /// episode (PTPE mapping) or threads per (episode, segment) (MTPE mapping), by the
    /// algorithm setting; the same choice applies to PreElim.
    fn kernel_for(&self, kind: CountKind, w: usize, nodes: usize, share: usize) -> EpisodeKernel {
        let per_episode = match *self.algorithm.lock() {
            ExactAlgorithm::Ptpe => true,
            ExactAlgorithm::Mtpe => false,
            ExactAlgorithm::Hybrid | ExactAlgorithm::Ends => self.prefers_ptpe(w, nodes, share),
        };
        match (kind, per_episode) {
            (CountKind::Exact, true) => EpisodeKernel::Ptpe,
            (CountKind::PreElim, true) => EpisodeKernel::PreElim,
            (CountKind::Exact, false) => EpisodeKernel::Mtpe {
                segments: self.segments_for(w, nodes, share),
            },
            (CountKind::PreElim, false) => EpisodeKernel::PreElimMtpe {
                segments: self.segments_for(w, nodes, share),
            },
        }
    }

    /// True once a device failure has switched this counter to the CPU.
    #[must_use]
    pub fn has_failed(&self) -> bool {
        self.failed.load(AtomicOrdering::Relaxed)
    }

    /// Counts `candidates` (all of one length `n`) on the GPUs, splitting them evenly; for
    /// exact counts each GPU picks PTPE or MTPE for its share.
    fn count_on_gpus(
        &self,
        kind: CountKind,
        n: usize,
        candidates: &[&Episode],
    ) -> Result<(Vec<u32>, f64), DeviceError> {
        // Upload sorted by (types, intervals): the 32 threads of a warp then mostly walk the
        // same merged event sequence (coherent loads, no divergence in the merge). Counts are
        // returned in the caller's order.
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.par_sort_unstable_by(|&a, &b| {
            let (x, y) = (candidates[a], candidates[b]);
            x.types()
                .cmp(y.types())
                .then_with(|| interval_bits(x).cmp(interval_bits(y)))
        });
        // Each GPU gets every w-th chunk of the sorted order, not a contiguous half: the cost of a
        // candidate depends on its types' event counts, so contiguous halves of a type-sorted
        // batch are unbalanced (the slower GPU sets the wall time). Chunks keep warps coherent.
        let w = self.workers.len();
        let shares = interleave(&mut order, w, INTERLEAVE_CHUNK);
        let mut batch = CandidateBatch {
            nodes: n,
            types: Vec::with_capacity(candidates.len() * n),
            ivs: Vec::new(),
        };
        batch.ivs.reserve(candidates.len() * n.saturating_sub(1));
        for e in order.iter().map(|&i| candidates[i]) {
            batch.types.extend(e.types().iter().map(|t| t.0));
            for iv in e.intervals() {
                let id = self
                    .intervals
                    .iter()
                    .position(|x| x == iv)
                    .expect("checked by the caller");
                batch.ivs.push(id as u32);
            }
        }
        let batch = Arc::new(batch);
        let m = candidates.len();
        // Worker i takes its interleaved share, a contiguous range of the batch; all are
        // submitted before any is awaited so the GPUs count concurrently.
        let tickets: Vec<_> = self
            .workers
            .iter()
            .enumerate()
            .zip(shares)
            .map(|((i, worker), r)| (i, worker, r))
            .filter(|(_, _, r)| !r.is_empty())
            .map(|(i, worker, r)| {
                let kernel = self.kernel_for(kind, i, n, r.len());
                let mut st = self.stats.lock();
                if kernel.segments().is_none() {
                    st.ptpe_candidates += r.len() as u64;
                } else {
                    st.mtpe_candidates += r.len() as u64;
                }
                drop(st);
                worker.count(kernel, batch.clone(), r)
            })
            .collect();
        let mut sorted_counts = Vec::with_capacity(m);
        let mut ms = 0.0;
        for t in tickets {
            let part = t.wait()?;
            ms += f64::from(part.kernel_ms);
            sorted_counts.extend(part.counts);
        }
        let mut counts = vec![0u32; m];
        for (&i, c) in order.iter().zip(sorted_counts) {
            counts[i] = c;
        }
        Ok((counts, ms))
    }
}

impl GpuCounter {
    /// Exact counts of `candidates` (of two or more nodes) from their prefixes' occurrence
    /// ends ([`ExactAlgorithm::Ends`]): the candidates in depth-first order of their prefix
    /// tree, cut into jobs of at most [`ENDS_JOB_ROOM`] prefix ends each ([`ends_jobs`]),
    /// dealt out to the GPUs round robin.
    fn count_by_ends_on_gpus(
        &self,
        candidates: &[&Episode],
    ) -> Result<(Vec<u32>, f64), DeviceError> {
        let counts_of = self.recording.index();
        let jobs = ends_jobs(
            candidates,
            |t| counts_of.times(crate::event::EventType(t)).len() as u64,
            ENDS_JOB_ROOM,
        );
        self.stats.lock().ends_candidates += candidates.len() as u64;
        let w = self.workers.len().max(1);
        let tickets: Vec<_> = jobs
            .into_iter()
            .enumerate()
            .map(|(i, (job, positions))| {
                (self.workers[i % w].count_by_ends(Arc::new(job)), positions)
            })
            .collect();
        let mut counts = vec![0u32; candidates.len()];
        let mut ms = 0.0;
        for (ticket, positions) in tickets {
            let part = ticket.wait()?;
            ms += f64::from(part.kernel_ms);
            for (&i, c) in positions.iter().zip(part.counts) {
                counts[i] = c;
            }
        }
        Ok((counts, ms))
    }
}

/// The most prefix ends (entries of 12 bytes, room for every event of each prefix's last
/// type) one [`EndsJob`] holds on the device: about 200 MB.
pub(crate) const ENDS_JOB_ROOM: u64 = 1 << 24;

/// `candidates` (all of one length `n ≥ 2`) as [`EndsJob`]s, each with the positions of its
/// candidates in `candidates`: in depth-first order of their prefix tree, each distinct
/// prefix of 2..n − 1 nodes one item of its level (parent: its own prefix's item), cut where
/// a job's prefix room (`events_of(x)` per prefix item, `x` its last type) would pass `room`
/// (a job holds at least one candidate, whatever its room).
///
/// # Panics
/// If the candidates do not all have the same length of at least two nodes.
#[must_use]
pub(crate) fn ends_jobs(
    candidates: &[&Episode],
    events_of: impl Fn(u32) -> u64,
    room: u64,
) -> Vec<(EndsJob, Vec<usize>)> {
    let Some(first) = candidates.first() else {
        return Vec::new();
    };
    let n = first.len();
    assert!(
        n >= 2 && candidates.iter().all(|e| e.len() == n),
        "ends jobs take candidates of one length of at least two nodes"
    );
    let order = prefix_order(candidates);
    let mut jobs: Vec<(EndsJob, Vec<usize>)> = Vec::new();
    let fresh = || {
        (
            EndsJob {
                prefixes: vec![crate::device::EndsLevel::default(); n - 2],
                candidates: crate::device::EndsLevel::default(),
            },
            Vec::new(),
        )
    };
    let mut job = fresh();
    let mut used = 0u64;
    // The previous candidate, and its prefix items per level.
    let mut prev: Option<&Episode> = None;
    let mut path: Vec<u32> = vec![0; n.saturating_sub(2)];
    for &i in &order {
        let e = candidates[i];
        let (types, ivs) = (e.types(), e.intervals());
        // Nodes shared with the previous candidate (types and gaps).
        let shared = prev.map_or(0, |p| {
            let (pt, pi) = (p.types(), p.intervals());
            (0..n)
                .take_while(|&k| {
                    pt[k] == types[k] && (k == 0 || pi[k - 1].bits() == ivs[k - 1].bits())
                })
                .count()
        });
        // Prefix items this candidate needs anew: levels d (prefixes of d + 2 nodes) with
        // d + 2 > shared.
        let need: u64 = (0..n - 2)
            .filter(|&d| d + 2 > shared)
            .map(|d| events_of(types[d + 1].0))
            .sum();
        if !job.1.is_empty() && used + need > room {
            jobs.push(std::mem::replace(&mut job, fresh()));
            used = 0;
            prev = None;
        }
        let shared = if prev.is_none() { 0 } else { shared };
        for d in 0..n - 2 {
            if d + 2 <= shared {
                continue;
            }
            let (last, x) = (types[d], types[d + 1]);
            let (low, high) = gap_of(ivs[d], last, x);
            let parent = if d == 0 { 0 } else { path[d - 1] };
            let level = &mut job.0.prefixes[d];
            path[d] = u32::try_from(level.len()).unwrap_or(u32::MAX);
            level.push(parent, last.0, x.0, low, high);
            used += events_of(x.0);
        }
        let (last, x) = (types[n - 2], types[n - 1]);
        let (low, high) = gap_of(ivs[n - 2], last, x);
        let parent = if n == 2 { 0 } else { path[n - 3] };
        job.0.candidates.push(parent, last.0, x.0, low, high);
        job.1.push(i);
        prev = Some(e);
    }
    if !job.1.is_empty() {
        jobs.push(job);
    }
    jobs
}

/// Candidates per chunk when a sorted batch is dealt out to several GPUs.
const INTERLEAVE_CHUNK: usize = 256;

/// Deals `order` out to `w` workers in chunks of `chunk`, round robin, and regroups it so each
/// worker's chunks are contiguous; returns each worker's range of the regrouped order. Shares
/// differ by at most one chunk.
fn interleave(order: &mut Vec<usize>, w: usize, chunk: usize) -> Vec<std::ops::Range<usize>> {
    let w = w.max(1);
    let chunk = chunk.max(1);
    let mut out = Vec::with_capacity(order.len());
    let mut ranges = Vec::with_capacity(w);
    for i in 0..w {
        let start = out.len();
        for c in order.chunks(chunk).skip(i).step_by(w) {
            out.extend_from_slice(c);
        }
        ranges.push(start..out.len());
    }
    *order = out;
    ranges
}

/// The interval bounds of `e` as bit patterns (a total order for sorting batches).
fn interval_bits(e: &Episode) -> impl Iterator<Item = u64> + '_ {
    e.intervals()
        .iter()
        .flat_map(|iv| [iv.low().to_bits(), iv.high().to_bits()])
}

/// [`DeviceError::Unsupported`] unless `index` holds as many events and types as `stream` (a
/// shared host index must be `stream`'s, [`GpuCounter::reload_shared`]).
fn check_index(stream: &EventStream, index: &CpuCounter) -> Result<(), DeviceError> {
    let index = index.index();
    let (events, types) = (
        index.all_times().len(),
        index.offsets().len().saturating_sub(1),
    );
    if events == stream.len() && types == stream.alphabet().len() {
        Ok(())
    } else {
        Err(DeviceError::Unsupported(format!(
            "a host index of {events} events of {types} types given for a stream of {} events of {} types: the index must be the stream's",
            stream.len(),
            stream.alphabet().len()
        )))
    }
}

/// The kernels' view of the stream: the type index plus the interval table.
fn stream_data(index: &TypeIndex, intervals: &[Interval]) -> Result<StreamData, DeviceError> {
    let too_big = || DeviceError::Unsupported("more than 2^32 events".into());
    Ok(StreamData {
        offsets: index
            .offsets()
            .iter()
            .map(|&o| u32::try_from(o).map_err(|_| too_big()))
            .collect::<Result<_, _>>()?,
        times: index.all_times().to_vec(),
        lo: intervals.iter().map(|iv| iv.low()).collect(),
        hi: intervals.iter().map(|iv| iv.high()).collect(),
    })
}

impl Counter for GpuCounter {
    fn name(&self) -> &str {
        "gpu"
    }

    fn has_join_bounds(&self) -> bool {
        !self.has_failed()
    }

    fn coarse_thresholds(&self) -> bool {
        true
    }

    fn join_bounds(&self, job: &crate::episode::bound::JoinBounds) -> Option<Vec<u64>> {
        if self.has_failed() || job.joins.is_empty() {
            return None;
        }
        let nodes = job.prefixes.first().map_or(0, Episode::len);
        if nodes < 2 || job.prefixes.iter().any(|p| p.len() != nodes) {
            return None;
        }
        let gap = |a: crate::event::EventType, iv: Interval, b: crate::event::EventType| {
            (iv.low_by_time(a < b), iv.high())
        };
        let mut d = crate::device::episodes::BoundJob {
            nodes,
            ..Default::default()
        };
        for p in &job.prefixes {
            d.chain_types.extend(p.types().iter().map(|t| t.0));
            for (w, iv) in p.types().windows(2).zip(p.intervals()) {
                let (lo, hi) = gap(w[0], *iv, w[1]);
                d.chain_low.push(lo);
                d.chain_high.push(hi);
            }
        }
        for &(a, iv, x) in &job.pairs {
            let (lo, hi) = gap(a, iv, x);
            d.pair_from.push(a.0);
            d.pair_to.push(x.0);
            d.pair_low.push(lo);
            d.pair_high.push(hi);
        }
        d.join_prefix = job.joins.iter().map(|j| j.0).collect();
        d.join_pair = job.joins.iter().map(|j| j.1).collect();
        match self.workers[0].join_bounds(Arc::new(d)).wait() {
            Ok(b) => Some(b.into_iter().map(u64::from).collect()),
            Err(e) => {
                tracing::warn!(error = %e, "GPU join bounds failed; computing them on the CPU.");
                None
            }
        }
    }

    fn count(&self, kind: CountKind, candidates: &[Episode]) -> Result<Vec<u64>, CountError> {
        if self.has_failed() {
            self.stats.lock().cpu_fallback += candidates.len() as u64;
            return self.cpu.get().count(kind, candidates);
        }
        // Group by length (one kernel instantiation per N); the rest goes to the CPU.
        let mut by_len: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut on_cpu: Vec<usize> = Vec::new();
        for (i, e) in candidates.iter().enumerate() {
            let known = e.intervals().iter().all(|iv| self.intervals.contains(iv));
            if e.len() <= MAX_GPU_NODES && known {
                by_len.entry(e.len()).or_default().push(i);
            } else {
                on_cpu.push(i);
            }
        }
        let mut out = vec![0u64; candidates.len()];
        let mut kernel_ms = 0.0;
        let mut gpu_n = 0u64;
        let mut overflowed = 0u64;
        let unsupported = on_cpu.len() as u64;
        let by_ends = kind == CountKind::Exact && *self.algorithm.lock() == ExactAlgorithm::Ends;
        for (n, members) in &by_len {
            let refs: Vec<&Episode> = members.iter().map(|&i| &candidates[i]).collect();
            // A pair's prefix is a single node: nothing to share, so pairs stay with the
            // hybrid kernels (whose segments split a candidate's events across threads).
            let counted = if by_ends && *n >= 3 {
                self.count_by_ends_on_gpus(&refs)
            } else {
                self.count_on_gpus(kind, *n, &refs)
            };
            match counted {
                Ok((counts, ms)) => {
                    kernel_ms += ms;
                    gpu_n += members.len() as u64;
                    for (&i, c) in members.iter().zip(counts) {
                        if c == COUNT_OVERFLOW {
                            on_cpu.push(i);
                            overflowed += 1;
                        } else {
                            out[i] = u64::from(c);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "GPU counting failed; counting on the CPU from now on.");
                    self.failed.store(true, AtomicOrdering::Relaxed);
                    self.stats.lock().cpu_fallback += candidates.len() as u64;
                    return self.cpu.get().count(kind, candidates);
                }
            }
        }
        if !on_cpu.is_empty() {
            let rest: Vec<Episode> = on_cpu.iter().map(|&i| candidates[i].clone()).collect();
            for (&i, c) in on_cpu.iter().zip(self.cpu.get().count(kind, &rest)?) {
                out[i] = c;
            }
        }
        let mut st = self.stats.lock();
        st.gpu_candidates += gpu_n;
        st.kernel_ms += kernel_ms;
        st.overflow_recounts += overflowed;
        st.cpu_fallback += unsupported;
        Ok(out)
    }

    fn events_touched(&self, episode: &Episode) -> u64 {
        self.recording.events_touched(episode)
    }

    /// Two PTPE waves of every GPU (3-node episodes): with fewer, Eq. 3 picks MTPE anyway.
    fn preferred_batch(&self) -> usize {
        let resident: u64 = self
            .workers
            .iter()
            .map(|w| w.ptpe_resident_threads(3))
            .sum();
        usize::try_from(2 * resident).map_or(usize::MAX, |b| b.max(1 << 16))
    }
}

/// How a GPU counter is set up (`--gpus`, `--exact-kernel`, `--calibration`).
#[derive(Clone, Debug, Default)]
pub struct GpuSettings {
    /// GPU ordinals (default: every GPU found).
    pub gpus: Option<Vec<usize>>,
    /// The exact kernel (default: the hybrid choice).
    pub exact: ExactAlgorithm,
    /// A calibration for every GPU, instead of the stored per-model ones (read once, by
    /// [`crate::episode::MiningOptions::resolve`] or [`Calibration::load`]).
    pub calibration: Option<Calibration>,
    /// MTPE threads per resident PTPE thread slot (default [`MTPE_THREADS_PER_SLOT`]; see
    /// [`GpuCounter::set_mtpe_threads_per_slot`]), for kernel studies.
    pub mtpe_threads_per_slot: Option<u64>,
}

/// Times worker 0's device (a counter on one GPU, as `synfire calibrate` and the first-use
/// measurement make).
impl KernelTimer for GpuCounter {
    fn device(&self) -> DeviceInfo {
        self.workers[0].info().clone()
    }

    fn exact_kernel_ms(
        &self,
        algorithm: ExactAlgorithm,
        candidates: &[Episode],
        repeat: usize,
    ) -> Result<(f64, Vec<u64>), CountError> {
        self.set_exact_algorithm(algorithm);
        let counts = self.count(CountKind::Exact, candidates)?; // warm-up
        let mut ms = Vec::with_capacity(repeat.max(1));
        for _ in 0..repeat.max(1) {
            self.reset_stats();
            self.count(CountKind::Exact, candidates)?;
            ms.push(self.stats().kernel_ms);
        }
        ms.sort_by(f64::total_cmp);
        Ok((ms[ms.len() / 2], counts))
    }

    fn resident_threads(&self, nodes: usize) -> u64 {
        GpuCounter::resident_threads(self, 0, nodes).max(1)
    }
}

/// The crossover table of GPU `ordinal`'s model measured on first use
/// ([`calibrate::Plan::FIRST_USE`] over the Sym26 stream, seed 1, on a counter of its own), or
/// why it could not be.
fn first_use_calibration(ordinal: usize) -> Result<Calibration, String> {
    let stream = crate::synth::generate(&crate::synth::SynthParams::sym26(1))
        .map_err(|e| format!("the calibration stream: {e}"))?;
    let intervals = Interval::parse_list(calibrate::SYM26_INTERVALS)
        .map_err(|e| format!("the calibration intervals: {e}"))?;
    let gpu = GpuCounter::start(&stream, None, &intervals, &[ordinal], false, Some(0))
        .map_err(|e| format!("a counter on GPU {ordinal}: {e}"))?;
    let types = u32::try_from(stream.alphabet().len()).map_err(|e| e.to_string())?;
    calibrate::measure(
        &gpu,
        types,
        &intervals,
        &[],
        &Plan::FIRST_USE,
        format!(
            "Sym26 seed 1 ({} events), random candidates over its {} intervals (measured on first use)",
            stream.len(),
            intervals.len()
        ),
        &mut |_| {},
    )
    .map_err(|e| format!("measuring GPU {ordinal}: {e}"))
}

/// The counter for `choice`: a [`GpuCounter`] set up by `settings` or the [`CpuCounter`].
///
/// # Errors
/// With [`DeviceChoice::Gpu`]: any [`DeviceError`] (no driver, no device, a bad ordinal, a
/// failed start). [`DeviceChoice::Auto`] never fails for want of a GPU: it logs why and
/// counts on the CPU.
pub fn select_counter(
    stream: &EventStream,
    intervals: &[Interval],
    choice: DeviceChoice,
    settings: &GpuSettings,
) -> Result<Box<dyn Counter>, DeviceError> {
    Ok(match select_gpu(stream, intervals, choice, settings)? {
        Some(gpu) => Box::new(gpu),
        None => Box::new(CpuCounter::new(stream)),
    })
}

/// The [`GpuCounter`] for `choice`, or `None` where the CPU counts (`Cpu`, or `Auto` without a
/// usable GPU, logged by [`crate::device::resolve`]).
///
/// # Errors
/// As [`select_counter`].
pub fn select_gpu(
    stream: &EventStream,
    intervals: &[Interval],
    choice: DeviceChoice,
    settings: &GpuSettings,
) -> Result<Option<GpuCounter>, DeviceError> {
    let counter = start_gpu(stream, None, intervals, choice, settings, Some(0))?;
    if let Some(c) = &counter {
        log_counting(c);
    }
    Ok(counter)
}

/// The line that says which GPUs `counter` counts on ([`select_gpu`]'s).
pub(crate) fn log_counting(counter: &GpuCounter) {
    let names: Vec<String> = counter
        .devices()
        .iter()
        .map(|d| format!("{} ({})", d.ordinal, d.name))
        .collect();
    tracing::info!(gpus = %names.join(", "), "Counting on the GPU.");
}

/// [`select_gpu`] without its log line, sharing `recording` (the host index of `stream`,
/// [`GpuCounter::new_shared`]) when given, with device thread `i` pinned to core
/// `(first_core + i) % cores` (none without `first_core`; [`select_gpu`]: core 0 on), for a
/// caller starting several counters of one stream (the significance engine), which logs them
/// once.
///
/// # Errors
/// As [`select_counter`]; [`DeviceError::Unsupported`] when `recording` is not `stream`'s
/// ([`GpuCounter::reload_shared`]).
pub(crate) fn start_gpu(
    stream: &EventStream,
    recording: Option<Arc<CpuCounter>>,
    intervals: &[Interval],
    choice: DeviceChoice,
    settings: &GpuSettings,
    first_core: Option<usize>,
) -> Result<Option<GpuCounter>, DeviceError> {
    let gpus = settings.gpus.as_deref();
    let attempt = || -> Result<GpuCounter, DeviceError> {
        let found = crate::device::probe()?;
        let ordinals: Vec<usize> = match gpus {
            Some(list) => {
                for &o in list {
                    if !found.iter().any(|d| d.ordinal == o) {
                        return Err(DeviceError::InvalidOrdinal {
                            ordinal: o,
                            count: found.len(),
                        });
                    }
                }
                list.to_vec()
            }
            None => found.iter().map(|d| d.ordinal).collect(),
        };
        // A calibration given for every GPU: no model's table to look up or measure.
        GpuCounter::start(
            stream,
            recording,
            intervals,
            &ordinals,
            settings.calibration.is_none(),
            first_core,
        )
    };
    let Some(mut c) = crate::device::resolve(choice, "episode counting", attempt)? else {
        return Ok(None);
    };
    c.set_exact_algorithm(settings.exact);
    if let Some(threads) = settings.mtpe_threads_per_slot {
        c.set_mtpe_threads_per_slot(threads);
    }
    if let Some(calibration) = &settings.calibration {
        c.set_calibration(calibration);
    }
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::{GpuStats, check_index, interleave};

    /// A shared host index is taken only for a stream of its numbers of events and types,
    /// and the refusal names both.
    #[test]
    fn a_shared_index_must_have_the_streams_events_and_types() {
        use crate::device::DeviceError;
        use crate::episode::CpuCounter;
        use crate::event::{Alphabet, EventStream, EventType, Ordering};
        let make = |n: u32, units: u32| {
            let times: Vec<f64> = (0..n).map(|i| f64::from(i) * 0.001).collect();
            let types: Vec<EventType> = (0..n).map(|i| EventType(i % units)).collect();
            let labels: Vec<String> = (0..units).map(|u| format!("u{u}")).collect();
            let alphabet = Alphabet::from_labels(labels).unwrap();
            EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).unwrap()
        };
        let a = make(100, 3);
        assert!(check_index(&a, &CpuCounter::new(&a)).is_ok());
        for other in [make(99, 3), make(100, 4)] {
            match check_index(&a, &CpuCounter::new(&other)) {
                Err(DeviceError::Unsupported(why)) => {
                    assert!(why.contains("stream of 100 events of 3 types"), "{why}");
                    assert!(
                        why.contains(&format!(
                            "index of {} events of {} types",
                            other.len(),
                            other.alphabet().len()
                        )),
                        "{why}"
                    );
                }
                r => panic!("{r:?}"),
            }
        }
    }

    /// Two counters' totals add field by field, and a later snapshot less an earlier one
    /// gives back what was added in between.
    #[test]
    fn stats_add_and_subtract_field_by_field() {
        let a = GpuStats {
            gpu_candidates: 10,
            overflow_recounts: 1,
            cpu_fallback: 2,
            kernel_ms: 1.5,
            ptpe_candidates: 3,
            mtpe_candidates: 7,
            ends_candidates: 2,
        };
        let b = GpuStats {
            gpu_candidates: 5,
            overflow_recounts: 0,
            cpu_fallback: 4,
            kernel_ms: 0.25,
            ptpe_candidates: 5,
            mtpe_candidates: 0,
            ends_candidates: 9,
        };
        let sum = a.plus(&b);
        assert_eq!(
            sum,
            GpuStats {
                gpu_candidates: 15,
                overflow_recounts: 1,
                cpu_fallback: 6,
                kernel_ms: 1.75,
                ptpe_candidates: 8,
                mtpe_candidates: 7,
                ends_candidates: 11,
            }
        );
        assert_eq!(sum.since(&a), b);
    }

    #[test]
    fn interleave_deals_chunks_round_robin_and_keeps_a_permutation() {
        for (n, w, chunk) in [
            (0usize, 2usize, 4usize),
            (10, 1, 3),
            (1000, 2, 256),
            (1001, 3, 7),
        ] {
            let mut order: Vec<usize> = (0..n).rev().collect();
            let before = order.clone();
            let ranges = interleave(&mut order, w, chunk);
            assert_eq!(ranges.len(), w);
            assert_eq!(ranges.first().map_or(0, |r| r.start), 0);
            assert_eq!(ranges.last().map_or(0, |r| r.end), n);
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
            }
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            // Worker i's first chunk is chunk i of the original order.
            for (i, r) in ranges.iter().enumerate() {
                if !r.is_empty() {
                    assert_eq!(order[r.start], before[i * chunk]);
                }
            }
            let sizes: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
            let (lo, hi) = (
                sizes.iter().min().copied().unwrap_or(0),
                sizes.iter().max().copied().unwrap_or(0),
            );
            assert!(hi - lo <= chunk, "{sizes:?}");
        }
    }
}

#[cfg(test)]
mod ends_job_tests {
    use super::ends_jobs;
    use crate::device::EndsJob;
    use crate::episode::count::TypeIndex;
    use crate::episode::counter::{CountKind, Counter, CpuCounter};
    use crate::episode::ends::Ends;
    use crate::episode::model::{Episode, Interval};
    use crate::event::{Alphabet, EventStream, EventType, Ordering};

    /// What the device runs for `job` (`kernels/ends.cu`, whose sweep
    /// `tools/ends-emulation.cpp` checks against enumerated occurrences), run on the host with
    /// [`Ends`]: each prefix level from its parents, then the candidates' counts.
    fn run_on_host(index: &TypeIndex, job: &EndsJob) -> Vec<u64> {
        let mut prev: Vec<Ends> = Vec::new();
        let parent_of = |prev: &[Ends], d: usize, parent: u32, last: u32| {
            if d == 0 {
                Ends::single(index, EventType(last))
            } else {
                prev[parent as usize].clone()
            }
        };
        for (d, l) in job.prefixes.iter().enumerate() {
            let next = (0..l.len())
                .map(|i| {
                    let mut out = Ends::default();
                    parent_of(&prev, d, l.parent[i], l.last[i]).extend_by_gap_into(
                        index,
                        EventType(l.last[i]),
                        (l.low[i], l.high[i]),
                        EventType(l.x[i]),
                        &mut out,
                    );
                    out
                })
                .collect();
            prev = next;
        }
        let c = &job.candidates;
        let d = job.prefixes.len();
        (0..c.len())
            .map(|i| {
                parent_of(&prev, d, c.parent[i], c.last[i]).count_by_gap(
                    index,
                    EventType(c.last[i]),
                    (c.low[i], c.high[i]),
                    EventType(c.x[i]),
                )
            })
            .collect()
    }

    /// The jobs of random candidate lists (lengths 2–5, shared prefixes, repeated types,
    /// lag-0 gaps), cut at several rooms, give every candidate exactly once and the CPU
    /// counter's counts; a tight room cuts the list into several jobs.
    #[test]
    fn ends_jobs_count_as_the_cpu_counter() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let alphabet = Alphabet::from_labels(["A", "B", "C", "D", "E"]).unwrap();
        let intervals = [
            Interval::new(0.0, 0.005).unwrap(),
            Interval::new(0.005, 0.01).unwrap(),
            Interval::closed(0.0, 0.002).unwrap(),
        ];
        let mut cuts = 0;
        let mut nonzero = 0;
        for round in 0..30 {
            let n = 100 + next(500) as usize;
            let mut times: Vec<f64> = (0..n).map(|_| next(3000) as f64 * 1e-3).collect();
            times.sort_by(f64::total_cmp);
            let types = (0..n).map(|_| EventType(next(5) as u32)).collect();
            let stream =
                EventStream::new(times, types, alphabet.clone(), Ordering::SortIfNeeded).unwrap();
            let cpu = CpuCounter::new(&stream);
            let index = cpu.index();
            let len = 2 + round % 4;
            // Candidates grown from a few shared prefixes.
            let roots: Vec<Episode> = (0..3)
                .map(|_| {
                    let ty: Vec<EventType> = (0..len).map(|_| EventType(next(5) as u32)).collect();
                    let ivs = (1..len).map(|_| intervals[next(3) as usize]).collect();
                    Episode::new(ty, ivs)
                })
                .collect();
            let candidates: Vec<Episode> = (0..60)
                .map(|_| {
                    let root = &roots[next(3) as usize];
                    let keep = 1 + next(len as u64 - 1) as usize;
                    let mut ty = root.types()[..keep].to_vec();
                    let mut ivs = root.intervals()[..keep - 1].to_vec();
                    while ty.len() < len {
                        ty.push(EventType(next(5) as u32));
                        ivs.push(intervals[next(3) as usize]);
                    }
                    Episode::new(ty, ivs)
                })
                .collect();
            let want = cpu.count(CountKind::Exact, &candidates).unwrap();
            nonzero += want.iter().filter(|&&c| c > 0).count();
            let refs: Vec<&Episode> = candidates.iter().collect();
            let events_of = |t: u32| index.times(EventType(t)).len() as u64;
            for room in [0, 200, super::ENDS_JOB_ROOM] {
                let jobs = ends_jobs(&refs, events_of, room);
                if room == 0 && len > 2 {
                    assert_eq!(
                        jobs.len(),
                        candidates.len(),
                        "one candidate a job at room 0"
                    );
                }
                cuts += jobs.len().saturating_sub(1);
                let mut got = vec![None; candidates.len()];
                for (job, positions) in &jobs {
                    assert_eq!(job.candidates.len(), positions.len());
                    for (&i, c) in positions.iter().zip(run_on_host(index, job)) {
                        assert!(got[i].is_none(), "candidate {i} in two jobs");
                        got[i] = Some(c);
                    }
                }
                let got: Vec<u64> = got
                    .into_iter()
                    .map(|c| c.expect("every candidate"))
                    .collect();
                assert_eq!(got, want, "length {len}, room {room}");
            }
        }
        assert!(cuts > 100, "only {cuts} cuts");
        assert!(nonzero > 300, "only {nonzero} nonzero counts");
    }
}
