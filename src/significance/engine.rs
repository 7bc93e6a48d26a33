//! Where surrogates are mined and counted: on the CPU ([`CpuCounter`], several surrogates at
//! once on rayon's pool), or on the GPUs ([`GpuCounter`]s, [`gpu_counters`] surrogates at once,
//! each on a thread of its own with a counter of its own, each batch of candidates split
//! across every GPU, so one surrogate's host work (candidate generation, bounds) overlaps
//! another's counting on the device). Counts are exact either way, so the p-values do not
//! depend on the choice (`tests/significance_gpu.rs` checks them equal on a GPU host).
//!
//! A surrogate is generated on the host (a pure function of the seed and its index,
//! [`super::surrogate`]) and uploaded once per pass; on the GPU the level-wise mining and the
//! counts of the tested union run on the device.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::device::{DeviceChoice, DeviceError};
use crate::episode::count::count_pair;
use crate::episode::{
    CountKind, Counter, CpuCounter, Episode, GpuCounter, GpuSettings, GpuStats, MineError,
    MinerConfig, Progress, log_counting, mine_with, start_gpu,
};
use crate::event::EventStream;

use super::error::SignificanceError;
use super::gpu::floor_job;
use super::spectrum::{FloorMax, max_count_by_size};
use super::surrogate::Surrogates;
use super::testing::Sums;

/// A GPU counter and the surrogates whose recording it was last loaded with, if that is the
/// stream it holds (so that their surrogates can be generated on its devices from it). A weak
/// reference keeps the allocation, so another `Surrogates` (of another stream: a sample
/// split's other part, say) never compares equal to it.
pub(crate) struct Slot<'g> {
    gpu: GpuSlot<'g>,
    holds: Option<std::sync::Weak<Surrogates>>,
}

impl<'g> Slot<'g> {
    fn new(gpu: GpuSlot<'g>) -> Self {
        Self { gpu, holds: None }
    }

    /// Whether the counter holds the recording `surrogates` were made from.
    fn holds(&self, surrogates: &Arc<Surrogates>) -> bool {
        self.holds
            .as_ref()
            .is_some_and(|w| w.ptr_eq(&Arc::downgrade(surrogates)))
    }
}

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

/// A surrogate's frequent episodes of two or more nodes, with their counts.
pub(crate) type Mined = Vec<(Episode, u64)>;

/// What [`Engine::spectrum_and_count`] finds in one surrogate.
pub(crate) struct SpectrumCounts {
    /// The largest count among its frequent episodes of each size. Shape `[max_level + 1]`.
    pub(crate) max_by_size: Vec<u64>,
    /// The exact counts of the list asked for. Shape `[list]`.
    pub(crate) counts: Vec<u64>,
    /// Seconds of the search for `max_by_size`.
    pub(crate) search_s: f64,
    /// Seconds of the counts of the list.
    pub(crate) count_s: f64,
}

/// Surrogates searched round by round before the one-floor pass's batches (their deepest
/// maxima set the floor; [`Engine::spectrum_maxima`]).
pub(super) const FLOOR_PILOT: u64 = 8;

/// Surrogates per device batch of a list's counts ([`Engine::sums_of_counts`]).
pub(super) const COUNT_BATCH: usize = 100;

/// Surrogates per device batch of the one-floor pass ([`Engine::spectrum_maxima`]).
pub(super) const FLOOR_BATCH: usize = 32;

/// Batches in flight at once, each on its own thread and GPU counter (its own device thread):
/// a batch's host preparation (on rayon's pool) and its pass's host steps overlap the other
/// batches' kernels. On one H200 with 16 host cores, 3 left the dense preset's first pass
/// (1,000 surrogates) at 6.0–6.4 s, each thread preparing and passing in turn.
const FLOOR_THREADS: usize = 8;

/// Where a batch's maxima (or its error) land. Shape of the maxima `[batch][max_level + 1]`.
type BatchSlot = Mutex<Option<Result<Vec<Vec<u64>>, SignificanceError>>>;

/// The one-floor pass's work, summed over batches.
#[derive(Default)]
struct FloorStats {
    fell_back: usize,
    counted: u64,
    joins: u64,
    kernel_ms: f32,
    joins_ms: f32,
    pass_ms: f64,
    steps_ms: Vec<(&'static str, f64)>,
    prep_s: f64,
    device_s: f64,
}

/// GPU counters (each on every GPU) working on different surrogates at once: one per host
/// core, at least 4 and at most 32. Each counter's thread does its surrogate's host work
/// (bounds, candidate generation, the spectrum's threshold search) while the others count on
/// the device, so the host's cores, not the GPU, set how many pay off: on one H100 with 16
/// host cores, the dense preset's `spectrum` to level 4 with 100 surrogates took 19.3 s with
/// 4 counters, 7.3 s with 16 and 7.0 s with 32 (`docs/benchmarks.md`).
#[must_use]
pub(super) fn gpu_counters() -> usize {
    std::thread::available_parallelism()
        .map_or(4, std::num::NonZeroUsize::get)
        .clamp(4, 32)
}

/// The environment variable that chooses [`CounterCores`]: `spread` (the default), `first` or
/// `off`; for measuring the choice (`docs/significance.md`, "On the GPU").
pub(crate) const COUNTER_CORES_VAR: &str = "SYNFIRE_COUNTER_CORES";

/// Which host cores the device threads of the engine's GPU counters are pinned to (each
/// counter has one device thread per GPU it counts on, `workers` in all). Chosen by
/// [`COUNTER_CORES_VAR`]. On an H100 host with one counter (`guided`'s) `spread` and `first`
/// gave the same time (`docs/benchmarks.md`); with 16 counters it is not measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CounterCores {
    /// Counter `k`'s threads on consecutive cores from `k × workers`, wrapping around the
    /// host's cores: on a one-GPU host, counter `k` on core `k`.
    Spread,
    /// Every counter's threads on cores `0, 1, …` (as one counter alone pins them): on a
    /// one-GPU host, every counter's thread on core 0 (what the engine did before).
    First,
    /// Not pinned: the OS places the threads.
    Off,
}

impl CounterCores {
    /// The choice `$SYNFIRE_COUNTER_CORES` names; unset: [`CounterCores::Spread`]. Another
    /// value is reported (`warn`, naming the variable, its value and the values it takes)
    /// and the default used.
    pub(crate) fn from_env() -> Self {
        let value = std::env::var(COUNTER_CORES_VAR).ok();
        Self::parse(value.as_deref()).unwrap_or_else(|other| {
            tracing::warn!(
                variable = COUNTER_CORES_VAR,
                value = other,
                "Not a choice of cores for the GPU counters' device threads (spread, first or off); spreading them."
            );
            Self::Spread
        })
    }

    /// The choice `value` names (`None` or empty: [`CounterCores::Spread`]), or the value
    /// back when it names none.
    fn parse(value: Option<&str>) -> Result<Self, &str> {
        match value.map(str::trim) {
            None | Some("" | "spread") => Ok(Self::Spread),
            Some("first") => Ok(Self::First),
            Some("off") => Ok(Self::Off),
            Some(other) => Err(other),
        }
    }

    /// The core counter `k` (0 the first) pins its first device thread to (its others follow
    /// it; [`start_gpu`]), counters having `workers` device threads each; `None`: unpinned.
    pub(crate) fn first_core(self, k: usize, workers: usize) -> Option<usize> {
        match self {
            Self::Spread => Some(k * workers),
            Self::First => Some(0),
            Self::Off => None,
        }
    }
}

/// The first GPU counter of the engine (or of [`super::phases::WarmCounters`]) as
/// [`crate::episode::select_gpu`] makes it, its device threads pinned as `cores` says for
/// counter 0; `None` where the CPU counts.
///
/// # Errors
/// As [`crate::episode::select_gpu`].
pub(crate) fn first_counter(
    stream: &EventStream,
    config: &MinerConfig,
    choice: DeviceChoice,
    settings: &GpuSettings,
    cores: CounterCores,
) -> Result<Option<GpuCounter>, DeviceError> {
    let first_core = cores.first_core(0, 1);
    let counter = start_gpu(
        stream,
        None,
        &config.intervals,
        choice,
        settings,
        first_core,
    )?;
    if let Some(c) = &counter {
        log_counting(c);
    }
    Ok(counter)
}

/// At most this many of the engine's extra GPU counters start at once ([`more_counters`]).
/// Each start creates a CUDA context on a device thread of its own, loads the kernels and
/// uploads the recording (from a staging copy of its index made for the upload), and the GPU
/// driver serialises part of that (context creation), so more starts in flight add host
/// memory (one staging copy each) and contention for the driver more than speed: one after
/// another, each took 0.8–1.2 s on an H100 host (about 20 s for 16), all at once 3.5 s but a
/// peak of 17.8 GB instead of 14.1 GB for a 13.8 M-event recording when every counter still
/// built its own host copies. Four at once is not measured yet.
const CONCURRENT_STARTS: usize = 4;

/// The counters after the first, up to [`gpu_counters`] in all, each sharing `recording`
/// (the host index of `stream`, the first counter's [`GpuCounter::recording`]): one host copy
/// of the recording for all of them. They start [`CONCURRENT_STARTS`] at a time, on scoped
/// threads taking the next counter in turn, and are listed in that order (as one after
/// another would list them); one log line says how many started and in how many seconds. A
/// counter that cannot start (the GPU's memory full, say) ends the list with one warning
/// instead of failing the test, which the first counter alone can run: no later counter
/// starts, and any that were already starting are dropped (their device memory freed).
/// Counter `k` (1 the first of these) pins its device threads as `cores` says, counters
/// having `workers` device threads each (the first counter's).
pub(crate) fn more_counters(
    stream: &EventStream,
    recording: &Arc<CpuCounter>,
    config: &MinerConfig,
    settings: &GpuSettings,
    cores: CounterCores,
    workers: usize,
) -> Vec<GpuCounter> {
    let started = Instant::now();
    let wanted = gpu_counters().saturating_sub(1);
    let (out, failed) = start_in_order(wanted, CONCURRENT_STARTS, |i| {
        let shared = Some(Arc::clone(recording));
        let first_core = cores.first_core(i + 1, workers);
        start_gpu(
            stream,
            shared,
            &config.intervals,
            DeviceChoice::Gpu,
            settings,
            first_core,
        )
    });
    if let Some(e) = failed.error {
        tracing::warn!(error = %e, counters = out.len() + 1, dropped = failed.dropped, "Could not start another GPU counter; going on with those started before it.");
    }
    tracing::info!(
        counters = out.len() + 1,
        wanted = wanted + 1,
        at_once = CONCURRENT_STARTS,
        cores = ?cores,
        seconds = started.elapsed().as_secs_f64(),
        "GPU counters for the surrogates started, sharing the recording's host index."
    );
    out
}

/// How [`start_in_order`]'s list ended early, if it did.
#[derive(Debug)]
struct Ended<E> {
    /// The first start's error (none: the list ran its full length, or a start gave `None`).
    error: Option<E>,
    /// Items started after the first that did not (already starting when it failed), dropped.
    dropped: usize,
}

/// Where [`start_in_order`] puts start `i`'s outcome (none: not started).
type StartSlot<T, E> = Mutex<Option<Result<Option<T>, E>>>;

/// `start(0)`, `start(1)`, … `start(n - 1)` on at most `at_once` scoped threads at a time,
/// each taking the next index in turn; the items in index order up to the first start that
/// gave none or an error (as one after another would give them). No index after that one is
/// started once it is known; items already started after it are dropped and counted.
fn start_in_order<T: Send, E: Send>(
    n: usize,
    at_once: usize,
    start: impl Fn(usize) -> Result<Option<T>, E> + Sync,
) -> (Vec<T>, Ended<E>) {
    let results: Vec<StartSlot<T, E>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // The first index that gave no item: none after it is started.
    let ended_at = AtomicUsize::new(usize::MAX);
    std::thread::scope(|scope| {
        for _ in 0..at_once.max(1).min(n) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || i > ended_at.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = start(i);
                    if !matches!(r, Ok(Some(_))) {
                        ended_at.fetch_min(i, Ordering::Relaxed);
                    }
                    *results[i].lock() = Some(r);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(n);
    let mut ended: Option<Ended<E>> = None;
    for r in results.into_iter().map(Mutex::into_inner) {
        match (r, &mut ended) {
            (Some(Ok(Some(item))), None) => out.push(item),
            (Some(Ok(Some(_))), Some(e)) => e.dropped += 1,
            (Some(Err(error)), None) => {
                ended = Some(Ended {
                    error: Some(error),
                    dropped: 0,
                });
            }
            // A start that gave none, or one never made (after the first that gave none).
            (_, None) => {
                ended = Some(Ended {
                    error: None,
                    dropped: 0,
                });
            }
            (_, Some(_)) => {}
        }
    }
    (
        out,
        ended.unwrap_or(Ended {
            error: None,
            dropped: 0,
        }),
    )
}

/// The host index ([`CpuCounter`]) of each recording the engine's GPU counters are reloaded
/// with before generating its surrogates on their devices, built once and shared by every
/// counter ([`GpuCounter::reload_shared`]): one host copy of a recording instead of one per
/// counter (16 counters held 32 copies of a 13.8 M-event recording's index, two each).
#[derive(Default)]
struct Recordings<'g> {
    /// The stream the engine's counters were started with and its index (the counters'
    /// [`GpuCounter::recording`]); borrowed for the engine's life, so the same address is
    /// the same stream.
    start: Option<(&'g EventStream, Arc<CpuCounter>)>,
    /// Other recordings' indexes, by the surrogates made from them (a weak reference keeps
    /// the allocation, so a live entry never matches another `Surrogates`; entries whose
    /// surrogates are gone are dropped).
    by_surrogates: Mutex<Vec<(std::sync::Weak<Surrogates>, Arc<CpuCounter>)>>,
}

impl<'g> Recordings<'g> {
    /// The host index of `recording`, whose surrogates `surrogates` are: the start stream's,
    /// one built earlier for `surrogates`, or one built now (once: other threads asking
    /// for it meanwhile wait for it).
    fn index(&self, recording: &EventStream, surrogates: &Arc<Surrogates>) -> Arc<CpuCounter> {
        if let Some((stream, index)) = &self.start
            && std::ptr::eq(*stream, recording)
        {
            return Arc::clone(index);
        }
        let mut held = self.by_surrogates.lock();
        held.retain(|(s, _)| s.strong_count() > 0);
        if let Some((_, index)) = held
            .iter()
            .find(|(s, _)| std::ptr::eq(s.as_ptr(), Arc::as_ptr(surrogates)))
        {
            return Arc::clone(index);
        }
        let index = Arc::new(CpuCounter::new(recording));
        held.push((Arc::downgrade(surrogates), Arc::clone(&index)));
        index
    }
}

/// The counters surrogates are mined and counted with, and the work done.
pub(crate) struct Engine<'g> {
    kind: Kind<'g>,
    /// Candidates counted so far (after the bounds) and episodes recounted.
    counted: AtomicU64,
    /// Set by the caller to stop the test (checked before each surrogate and between the
    /// batches of candidates of a surrogate's mining).
    cancel: Option<Arc<AtomicBool>>,
    /// The recordings' shared host indexes ([`Engine::count_surrogate`]).
    recordings: Recordings<'g>,
}

/// The mining progress of a surrogate: nothing to report, only the cancel flag to answer.
struct CancelOnly<'a>(Option<&'a AtomicBool>);

impl Progress for CancelOnly<'_> {
    fn cancelled(&self) -> bool {
        self.0.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

enum Kind<'g> {
    /// [`CpuCounter`] per surrogate; surrogates in parallel.
    Cpu,
    /// [`GpuCounter`]s, each reloaded with the surrogate it works on; one thread per counter.
    Gpu(GpuCounters<'g>),
}

/// What starting the engine's counters after the first takes ([`more_counters`]'s
/// arguments).
struct StartMore<'g> {
    stream: &'g EventStream,
    recording: Arc<CpuCounter>,
    config: MinerConfig,
    settings: GpuSettings,
    cores: CounterCores,
    workers: usize,
}

impl StartMore<'_> {
    fn start(&self) -> Vec<GpuCounter> {
        more_counters(
            self.stream,
            &self.recording,
            &self.config,
            &self.settings,
            self.cores,
            self.workers,
        )
    }
}

/// The engine's GPU counters: the first (or the caller's), and the rest of
/// [`gpu_counters`] started only when a pass over many surrogates first needs them
/// ([`GpuCounters::for_passes`]), so work that one counter does (`guided`'s hybrids, a
/// family's counts) never waits for the others to start.
pub(crate) struct GpuCounters<'g> {
    have: Vec<Mutex<Slot<'g>>>,
    more: std::sync::OnceLock<Vec<Mutex<Slot<'g>>>>,
    start_more: Option<Box<StartMore<'g>>>,
}

impl<'g> GpuCounters<'g> {
    fn of(have: Vec<Mutex<Slot<'g>>>, start_more: Option<Box<StartMore<'g>>>) -> Self {
        Self {
            have,
            more: std::sync::OnceLock::new(),
            start_more,
        }
    }

    /// The counters started so far.
    fn started(&self) -> impl Iterator<Item = &Mutex<Slot<'g>>> {
        self.have
            .iter()
            .chain(self.more.get().into_iter().flatten())
    }

    /// Every counter, the others started first if they are not yet (once; a counter that
    /// cannot start ends the list, [`more_counters`]): how many threads a pass over many
    /// surrogates runs.
    fn for_passes(&self) -> usize {
        if let Some(start) = &self.start_more {
            self.more.get_or_init(|| {
                start
                    .start()
                    .into_iter()
                    .map(|c| Mutex::new(Slot::new(GpuSlot::Owned(Box::new(c)))))
                    .collect()
            });
        }
        self.started().count()
    }

    /// A counter no other thread holds (every thread of a pass holds at most one at a
    /// time, and a pass runs at most [`GpuCounters::for_passes`] threads), or the first.
    fn slot(&self) -> parking_lot::MutexGuard<'_, Slot<'g>> {
        self.started()
            .find_map(Mutex::try_lock)
            .unwrap_or_else(|| self.have[0].lock())
    }
}

impl<'g> Engine<'g> {
    fn of(kind: Kind<'g>) -> Self {
        Self {
            kind,
            counted: AtomicU64::new(0),
            cancel: None,
            recordings: Recordings::default(),
        }
    }

    /// Stops the work at the next surrogate (or batch of candidates) once `flag` is set.
    pub(crate) fn cancel_on(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// [`SignificanceError::Cancelled`] once the cancel flag is set.
    pub(crate) fn check_cancel(&self) -> Result<(), SignificanceError> {
        if CancelOnly(self.cancel.as_deref()).cancelled() {
            Err(SignificanceError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// The engine on GPU counters the caller lends (none: the CPU).
    pub(crate) fn lent(gpus: impl IntoIterator<Item = &'g mut GpuCounter>) -> Self {
        let slots: Vec<Mutex<Slot<'g>>> = gpus
            .into_iter()
            .map(|g| Mutex::new(Slot::new(GpuSlot::Lent(g))))
            .collect();
        if slots.is_empty() {
            Self::of(Kind::Cpu)
        } else {
            Self::of(Kind::Gpu(GpuCounters::of(slots, None)))
        }
    }

    /// The GPU counters' running totals summed over the counters ([`GpuStats`]), `None` on the
    /// CPU. Waits for each counter that another thread holds.
    pub(crate) fn gpu_stats(&self) -> Option<GpuStats> {
        let Kind::Gpu(slots) = &self.kind else {
            return None;
        };
        Some(slots.started().fold(GpuStats::default(), |total, slot| {
            total.plus(&slot.lock().gpu.get().stats())
        }))
    }

    /// Adds `n` candidate counts made outside the counters (`guided`'s hybrids).
    pub(crate) fn add_counted(&self, n: u64) {
        self.counted.fetch_add(n, Ordering::Relaxed);
    }

    /// Candidate counts made so far: mining candidates after the bounds, and recounts.
    pub(crate) fn candidates_counted(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }

    /// The engine `choice` gives for mining `stream` with `config` (`auto`: the GPUs when
    /// there are any): [`gpu_counters`] GPU counters sharing one host index of `stream`
    /// (the first's, [`more_counters`]), which [`Engine::count_surrogate`] reuses for
    /// `stream`, their device threads pinned as `$SYNFIRE_COUNTER_CORES` says
    /// ([`CounterCores`]).
    ///
    /// # Errors
    /// [`DeviceError`] for `gpu` without a usable GPU.
    pub(crate) fn new(
        stream: &'g EventStream,
        config: &MinerConfig,
        choice: DeviceChoice,
        settings: &GpuSettings,
    ) -> Result<Self, DeviceError> {
        if choice == DeviceChoice::Cpu {
            return Ok(Self::of(Kind::Cpu));
        }
        let cores = CounterCores::from_env();
        let Some(first) = first_counter(stream, config, choice, settings, cores)? else {
            return Ok(Self::of(Kind::Cpu));
        };
        let recording = Arc::clone(first.recording());
        let workers = first.worker_count();
        let slots = vec![Mutex::new(Slot::new(GpuSlot::Owned(Box::new(first))))];
        let start_more = Box::new(StartMore {
            stream,
            recording: Arc::clone(&recording),
            config: config.clone(),
            settings: settings.clone(),
            cores,
            workers,
        });
        let mut engine = Self::of(Kind::Gpu(GpuCounters::of(slots, Some(start_more))));
        engine.recordings.start = Some((stream, recording));
        Ok(engine)
    }

    /// Runs `f` on a counter holding `x`: a new [`CpuCounter`], or a free GPU counter
    /// reloaded with `x` (one upload for everything `f` counts).
    fn on_counter<T>(
        &self,
        x: &EventStream,
        f: impl FnOnce(&dyn Counter) -> Result<T, SignificanceError>,
    ) -> Result<T, SignificanceError> {
        match &self.kind {
            Kind::Cpu => f(&CpuCounter::new(x)),
            Kind::Gpu(slots) => {
                let mut slot = slots.slot();
                slot.holds = None;
                let gpu = slot.gpu.get();
                gpu.reload(x)?;
                f(&*gpu)
            }
        }
    }

    /// The exact counts of `list` in surrogate `s` of `recording`: on the CPU, or on a GPU
    /// counter whose devices generate the surrogate from the recording they hold (loaded
    /// once per counter; no upload per surrogate) when the method allows
    /// ([`Surrogates::device_job`]), else generated on the host and uploaded. Every counter
    /// reloaded with `recording` shares one host index of it ([`Recordings`]).
    pub(crate) fn count_surrogate(
        &self,
        recording: &EventStream,
        surrogates: &std::sync::Arc<Surrogates>,
        s: u64,
        list: &[Episode],
    ) -> Result<Vec<u64>, SignificanceError> {
        if list.is_empty() {
            return Ok(Vec::new());
        }
        if pairs_only(list) {
            return Ok(self.count_surrogate_pairs(recording, surrogates, s, list));
        }
        let job = match (&self.kind, surrogates.device_job(s)) {
            (Kind::Gpu(slots), Some(job)) => Some((slots, job)),
            _ => None,
        };
        let Some((slots, job)) = job else {
            // Only the listed episodes' units: the same counts (`generate_units`).
            let keep = units_of(list, recording.alphabet().len());
            return match surrogates.generate_units(s, &keep) {
                Ok(x) => self.count(&x, list),
                // No kept unit fires (surrogates keep every unit's spike count): no
                // occurrences.
                Err(super::SurrogateError::Stream(crate::event::EventError::Empty)) => {
                    Ok(vec![0; list.len()])
                }
                Err(e) => Err(e.into()),
            };
        };
        self.counted.fetch_add(list.len() as u64, Ordering::Relaxed);
        let mut slot = slots.slot();
        if !slot.holds(surrogates) {
            let index = self.recordings.index(recording, surrogates);
            slot.gpu.get().reload_shared(recording, index)?;
            slot.holds = Some(Arc::downgrade(surrogates));
        }
        let gpu = slot.gpu.get();
        let maker = std::sync::Arc::clone(surrogates);
        gpu.load_surrogate(
            job,
            std::sync::Arc::new(move || {
                maker
                    .generate(s)
                    .expect("a surrogate the device could generate builds on the host")
            }),
        )?;
        Ok(gpu.count(CountKind::Exact, list)?)
    }

    /// [`Engine::count_surrogate`] for every surrogate of `range`, in order; a list of pairs
    /// of distinct units only ([`Engine::count_surrogate_pairs`], on the CPU whatever the
    /// engine) on rayon's pool, so no GPU counter starts for it.
    ///
    /// # Errors
    /// As [`Engine::count_surrogate`]; [`SignificanceError::Cancelled`].
    pub(crate) fn count_surrogates(
        &self,
        recording: &EventStream,
        surrogates: &Arc<Surrogates>,
        range: Range<u64>,
        list: &[Episode],
    ) -> Result<Vec<Vec<u64>>, SignificanceError> {
        use rayon::prelude::*;
        if !list.is_empty() && pairs_only(list) {
            return range
                .into_par_iter()
                .map(|s| {
                    self.check_cancel()?;
                    Ok(self.count_surrogate_pairs(recording, surrogates, s, list))
                })
                .collect();
        }
        self.map_surrogates(range, |s| {
            self.count_surrogate(recording, surrogates, s, list)
        })
    }

    /// [`Engine::count_surrogate`] on the CPU for a list of pairs of distinct units only
    /// (`guided`'s `F₂`): each listed unit's surrogate train ([`Surrogates::unit_train`]) and
    /// each pair by [`count_pair`] on its two trains, without merging a stream. The counts
    /// are the [`CpuCounter`]'s on the surrogate's stream (which counts a pair by
    /// `count_pair` on the same trains: a unit's events in stream order are its sorted train),
    /// for a fraction of the cost when the list is short (no sort of the units' events).
    fn count_surrogate_pairs(
        &self,
        recording: &EventStream,
        surrogates: &Surrogates,
        s: u64,
        list: &[Episode],
    ) -> Vec<u64> {
        self.counted.fetch_add(list.len() as u64, Ordering::Relaxed);
        let keep = units_of(list, recording.alphabet().len());
        let trains: Vec<Vec<f64>> = keep
            .iter()
            .enumerate()
            .map(|(u, &k)| {
                if k {
                    surrogates.unit_train(s, u)
                } else {
                    Vec::new()
                }
            })
            .collect();
        list.iter()
            .map(|e| {
                let (a, b, iv) = (e.types()[0], e.types()[1], e.intervals()[0]);
                count_pair(
                    &trains[a.index()],
                    &trains[b.index()],
                    iv.low_by_time(a < b),
                    iv.high(),
                )
            })
            .collect()
    }

    /// The frequent episodes of two or more nodes of `x` mined with `config`, with counts,
    /// and the exact counts of `list` in `x`, on one counter.
    pub(crate) fn mine_and_count(
        &self,
        x: &EventStream,
        config: &MinerConfig,
        list: &[Episode],
    ) -> Result<(Mined, Vec<u64>), SignificanceError> {
        let progress = CancelOnly(self.cancel.as_deref());
        let (result, counts) = self.on_counter(x, |counter| {
            let result = mine_with(x, config, counter, &progress).map_err(|e| match e {
                MineError::Cancelled => SignificanceError::Cancelled,
                e => e.into(),
            })?;
            let counts = if list.is_empty() {
                Vec::new()
            } else {
                counter.count(CountKind::Exact, list)?
            };
            Ok((result, counts))
        })?;
        let counted: usize = result
            .levels
            .iter()
            .map(|l| l.candidates - l.removed_by_bounds)
            .sum();
        self.counted
            .fetch_add((counted + list.len()) as u64, Ordering::Relaxed);
        let mined = result
            .episodes
            .into_iter()
            .filter(|f| f.episode.len() >= 2)
            .map(|f| (f.episode, f.count))
            .collect();
        Ok((mined, counts))
    }

    /// The largest count among the frequent episodes of each size of `x` (as mining `x` with
    /// `config` finds them; [`max_count_by_size`]) and the exact counts of `list` in `x`, on
    /// one counter.
    pub(crate) fn spectrum_and_count(
        &self,
        x: &EventStream,
        config: &MinerConfig,
        list: &[Episode],
    ) -> Result<SpectrumCounts, SignificanceError> {
        let progress = CancelOnly(self.cancel.as_deref());
        let (found, out) = self.on_counter(x, |counter| {
            let started = Instant::now();
            let found = max_count_by_size(x, config, counter, &progress).map_err(|e| match e {
                MineError::Cancelled => SignificanceError::Cancelled,
                e => e.into(),
            })?;
            let search_s = started.elapsed().as_secs_f64();
            let started = Instant::now();
            let counts = if list.is_empty() {
                Vec::new()
            } else {
                counter.count(CountKind::Exact, list)?
            };
            let out = SpectrumCounts {
                max_by_size: found.max_by_size.clone(),
                counts,
                search_s,
                count_s: started.elapsed().as_secs_f64(),
            };
            Ok((found, out))
        })?;
        self.counted
            .fetch_add(found.counted + list.len() as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// Whether the engine counts on GPUs.
    pub(crate) fn on_gpu(&self) -> bool {
        matches!(self.kind, Kind::Gpu(_))
    }

    /// Whether [`Engine::spectrum_maxima`] runs the one-floor pass on GPUs (else it runs
    /// the round-by-round search per surrogate).
    pub(crate) fn floor_batches(&self, config: &MinerConfig) -> bool {
        matches!(self.kind, Kind::Gpu(_)) && config.max_level >= 2
    }

    /// Each surrogate's largest count per size among its frequent episodes (what
    /// [`Engine::spectrum_and_count`] finds, [`max_count_by_size`]), for every surrogate of
    /// `range`, in order.
    ///
    /// On the CPU, the round-by-round search per surrogate. On the GPUs
    /// ([`Engine::floor_batches`]):
    /// 1. **Pilot.** The first [`FLOOR_PILOT`] surrogates by the round-by-round search; the
    ///    floor is `φ = ⌊0.9 · min M_K⌋` over them (`K` the deepest size; 1 when some has
    ///    `M_K = 0`). Any floor gives exact results; this one makes the rest rarely fall back.
    /// 2. **Batches** of [`FLOOR_BATCH`] surrogates: the host generates each, its minimum count
    ///    `m_s` and single counts, and its pairs whose successor bound reaches the batch's
    ///    floor `max(φ, min m_s)` ([`pair_candidates_at`]); one device pass
    ///    ([`crate::device::episodes::floor`], through [`super::gpu::floor_pass`]) counts every
    ///    episode of every size with `c` at the floor, for the whole batch.
    /// 3. **Resolution.** Each surrogate's largest count per size at its floor
    ///    `max(φ, m_s)` gives its maxima wherever they reach that floor
    ///    ([`FloorMax::resolved`]); a surrogate whose deepest maximum lies below it (or whose
    ///    types' event counts differ from the batch's) is searched round by round on the host.
    ///
    /// # Errors
    /// Surrogate generation, counting and device errors; [`SignificanceError::Cancelled`].
    pub(crate) fn spectrum_maxima(
        &self,
        surrogates: &Arc<Surrogates>,
        range: Range<u64>,
        config: &MinerConfig,
    ) -> Result<Vec<Vec<u64>>, SignificanceError> {
        let adaptive = |s: u64| -> Result<Vec<u64>, SignificanceError> {
            Ok(self
                .spectrum_and_count(&surrogates.generate(s)?, config, &[])?
                .max_by_size)
        };
        let Kind::Gpu(slots) = &self.kind else {
            return self.map_surrogates(range, adaptive);
        };
        if !self.floor_batches(config) {
            return self.map_surrogates(range, adaptive);
        }
        let pilot_end = (range.start + FLOOR_PILOT).min(range.end);
        let mut out = self.map_surrogates(range.start..pilot_end, adaptive)?;
        if pilot_end == range.end {
            return Ok(out);
        }
        let deepest = out.iter().map(|m| m[config.max_level]).min().unwrap_or(0);
        let phi = (deepest * 9 / 10).max(1);
        let rest: Vec<u64> = (pilot_end..range.end).collect();
        let batches: Vec<&[u64]> = rest.chunks(FLOOR_BATCH).collect();
        let results: Vec<BatchSlot> = batches.iter().map(|_| Mutex::new(None)).collect();
        let stats = Mutex::new(FloorStats::default());
        let started = Instant::now();
        let threads = slots.for_passes().min(batches.len()).min(FLOOR_THREADS);
        on_threads(threads, 0..batches.len() as u64, |b| {
            let r = self.check_cancel().and_then(|()| {
                let mut slot = slots.slot();
                let gpu = slot.gpu.get();
                self.floor_batch(
                    gpu,
                    b as usize,
                    surrogates,
                    batches[b as usize],
                    config,
                    phi,
                    &stats,
                )
            });
            let ok = r.is_ok();
            *results[b as usize].lock() = Some(r);
            ok
        });
        for r in results {
            match r.into_inner() {
                Some(r) => out.extend(r?),
                None => return Err(SignificanceError::Cancelled),
            }
        }
        let stats = stats.into_inner();
        tracing::debug!(
            pilot = pilot_end - range.start,
            floor = phi,
            batched = rest.len(),
            fell_back = stats.fell_back,
            counted_on_device = stats.counted,
            joins_on_device = stats.joins,
            kernel_s = f64::from(stats.kernel_ms) / 1e3,
            joins_kernel_s = f64::from(stats.joins_ms) / 1e3,
            pass_s = stats.pass_ms / 1e3,
            pass_steps_ms = ?stats.steps_ms,
            host_prep_s = stats.prep_s,
            device_s = stats.device_s,
            wall_s = started.elapsed().as_secs_f64(),
            "Spectrum maxima by the one-floor pass on the GPUs."
        );
        Ok(out)
    }

    /// One batch of [`Engine::spectrum_maxima`] on `gpu` (its device `which % devices`).
    #[allow(clippy::too_many_arguments)]
    fn floor_batch(
        &self,
        gpu: &GpuCounter,
        which: usize,
        surrogates: &Arc<Surrogates>,
        batch: &[u64],
        config: &MinerConfig,
        phi: u64,
        stats: &Mutex<FloorStats>,
    ) -> Result<Vec<Vec<u64>>, SignificanceError> {
        use rayon::prelude::*;
        let started = Instant::now();
        let streams: Vec<EventStream> = batch
            .par_iter()
            .map(|&s| surrogates.generate(s).map_err(SignificanceError::from))
            .collect::<Result<_, _>>()?;
        let counters: Vec<CpuCounter> = streams.par_iter().map(CpuCounter::new).collect();
        let mins: Vec<u64> = streams
            .iter()
            .map(|x| config.threshold.min_count(x.len(), x.span()))
            .collect::<Result<_, _>>()
            .map_err(SignificanceError::from)?;
        let floor = phi.max(mins.iter().copied().min().unwrap_or(1));
        let n_types = streams[0].alphabet().len();
        let singles = crate::episode::candidates::level_one(n_types);
        let c1s: Vec<Vec<u64>> = counters
            .par_iter()
            .map(|c| c.count(CountKind::Exact, &singles))
            .collect::<Result<_, _>>()?;
        // The surrogates whose types' event counts are the first's go to the device together;
        // any other is searched round by round.
        let on_device: Vec<usize> = (0..batch.len())
            .filter(|&i| {
                counters[i].index().offsets() == counters[0].index().offsets()
                    && streams[i].alphabet().len() == n_types
            })
            .collect();
        let items: Vec<(&EventStream, &crate::episode::TypeIndex, &[u64])> = on_device
            .iter()
            .map(|&i| (&streams[i], counters[i].index(), &c1s[i][..]))
            .collect();
        let job = floor_job(config, floor, &items).ok_or_else(|| {
            SignificanceError::Device(DeviceError::Unsupported(
                "a floor batch whose streams differ".into(),
            ))
        })?;
        let prep_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let found = match super::gpu::floor_pass(gpu, Arc::new(job), which) {
            Ok(found) => found,
            // A batch the pass cannot lay out (more than 2^32 joins or events in it): every
            // surrogate of it round by round, said once per batch.
            Err(DeviceError::Unsupported(why)) => {
                tracing::warn!(
                    why,
                    surrogates = batch.len(),
                    "The one-floor pass on the GPU declined a batch; searching its surrogates round by round on the host."
                );
                crate::device::FloorResult::default()
            }
            Err(e) => return Err(e.into()),
        };
        let device_s = started.elapsed().as_secs_f64();
        self.counted.fetch_add(found.counted, Ordering::Relaxed);
        // Each surrogate's maxima from its floor, or None: searched round by round.
        let mut resolved: Vec<Option<Vec<u64>>> = vec![None; batch.len()];
        for (&i, best) in on_device.iter().zip(&found.best) {
            let at = floor.max(mins[i]);
            let pass = FloorMax {
                min_count: mins[i],
                floor: at,
                best_by_size: best.iter().map(|&b| if b >= at { b } else { 0 }).collect(),
            };
            resolved[i] = pass.resolved();
        }
        let progress = CancelOnly(self.cancel.as_deref());
        let fell_back = resolved.iter().filter(|r| r.is_none()).count();
        let out = resolved
            .into_par_iter()
            .zip(&streams)
            .zip(&counters)
            .map(|((r, x), c)| match r {
                Some(v) => Ok(v),
                None => max_count_by_size(x, config, c, &progress)
                    .map(|f| f.max_by_size)
                    .map_err(|e| match e {
                        MineError::Cancelled => SignificanceError::Cancelled,
                        e => e.into(),
                    }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut st = stats.lock();
        st.fell_back += fell_back;
        st.counted += found.counted;
        st.joins += found.joins;
        st.kernel_ms += found.kernel_ms;
        st.joins_ms += found.joins_ms;
        st.pass_ms += found.wall_ms;
        for &(name, ms) in &found.steps_ms {
            match st.steps_ms.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += ms,
                None => st.steps_ms.push((name, ms)),
            }
        }
        st.prep_s += prep_s;
        st.device_s += device_s;
        Ok(out)
    }

    /// The per-episode sums ([`Sums`]) of `list`'s exact counts over the surrogates of
    /// `range` of `recording` (whose own counts are `recording_counts`, shape `[list]`).
    /// On the CPU, and for a list with a single node, each surrogate by
    /// [`Engine::count_surrogate`]. On the GPUs, batches of [`COUNT_BATCH`] surrogates, each
    /// generated on the host for the list's units only ([`Surrogates::generate_units`], the
    /// same counts) and counted on one device in one launch per episode length
    /// ([`super::gpu::count_batch`]).
    ///
    /// # Errors
    /// Surrogate generation, counting and device errors; [`SignificanceError::Cancelled`].
    pub(crate) fn sums_of_counts(
        &self,
        recording: &EventStream,
        surrogates: &Arc<Surrogates>,
        range: Range<u64>,
        list: &[Episode],
        recording_counts: &[u64],
    ) -> Result<Sums, SignificanceError> {
        let one_by_one = |range: Range<u64>| {
            self.fold_surrogates(
                range,
                Sums::zero(list.len()),
                |s| self.count_surrogate(recording, surrogates, s, list),
                |acc, counts| acc.add(&counts, recording_counts),
                |a, b| a.merge(&b),
            )
        };
        let Kind::Gpu(slots) = &self.kind else {
            return one_by_one(range);
        };
        if list.is_empty() || list.iter().any(|e| e.len() < 2) {
            return one_by_one(range);
        }
        let keep = units_of(list, recording.alphabet().len());
        let all: Vec<u64> = range.collect();
        let batches: Vec<&[u64]> = all.chunks(COUNT_BATCH).collect();
        let results: Vec<Mutex<Option<Result<Sums, SignificanceError>>>> =
            batches.iter().map(|_| Mutex::new(None)).collect();
        let threads = slots.for_passes().min(batches.len()).min(FLOOR_THREADS);
        on_threads(threads, 0..batches.len() as u64, |b| {
            let r = self.check_cancel().and_then(|()| {
                use rayon::prelude::*;
                let batch = batches[b as usize];
                // Each surrogate for the list's units, or None when none of them fires (no
                // occurrence: zero counts).
                let streams: Vec<Option<EventStream>> = batch
                    .par_iter()
                    .map(|&s| match surrogates.generate_units(s, &keep) {
                        Ok(x) => Ok(Some(x)),
                        Err(super::SurrogateError::Stream(crate::event::EventError::Empty)) => {
                            Ok(None)
                        }
                        Err(e) => Err(SignificanceError::from(e)),
                    })
                    .collect::<Result<_, _>>()?;
                let indexes: Vec<Option<crate::episode::TypeIndex>> = streams
                    .par_iter()
                    .map(|x| x.as_ref().map(crate::episode::TypeIndex::new))
                    .collect();
                let mut sums = Sums::zero(list.len());
                let zeros = vec![0u64; list.len()];
                let first = indexes
                    .iter()
                    .flatten()
                    .next()
                    .map(|i| i.offsets().to_vec());
                let mut together = Vec::new();
                for (k, index) in indexes.iter().enumerate() {
                    match index {
                        None => sums = sums.add(&zeros, recording_counts),
                        Some(i) if Some(i.offsets()) == first.as_deref() => together.push(k),
                        // Another layout (a method that moves spikes between units): alone.
                        Some(_) => {
                            let counts =
                                self.count_surrogate(recording, surrogates, batch[k], list)?;
                            sums = sums.add(&counts, recording_counts);
                        }
                    }
                }
                if let (Some(offsets), false) = (first, together.is_empty()) {
                    let offsets: Vec<u32> = offsets
                        .iter()
                        .map(|&o| u32::try_from(o))
                        .collect::<Result<_, _>>()
                        .map_err(|_| {
                            SignificanceError::Device(DeviceError::Unsupported(
                                "more than 2^32 events in a surrogate".into(),
                            ))
                        })?;
                    let mut times = Vec::new();
                    for &k in &together {
                        times.extend_from_slice(
                            indexes[k].as_ref().map_or(&[][..], |i| i.all_times()),
                        );
                    }
                    let mut slot = slots.slot();
                    let counted = super::gpu::count_batch(
                        slot.gpu.get(),
                        list,
                        offsets,
                        times,
                        together.len(),
                        b as usize,
                    );
                    drop(slot);
                    match counted {
                        Ok(counts) => {
                            self.counted.fetch_add(
                                (together.len() * list.len()) as u64,
                                Ordering::Relaxed,
                            );
                            for c in counts.chunks(list.len()) {
                                sums = sums.add(c, recording_counts);
                            }
                        }
                        // A batch too large to lay out on the device: one surrogate at a time.
                        Err(DeviceError::Unsupported(why)) => {
                            tracing::warn!(why, "A batch count on the GPU declined; counting its surrogates one at a time.");
                            for &k in &together {
                                let counts =
                                    self.count_surrogate(recording, surrogates, batch[k], list)?;
                                sums = sums.add(&counts, recording_counts);
                            }
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(sums)
            });
            let ok = r.is_ok();
            *results[b as usize].lock() = Some(r);
            ok
        });
        let mut total = Sums::zero(list.len());
        for r in results {
            match r.into_inner() {
                Some(r) => total = total.merge(&r?),
                None => return Err(SignificanceError::Cancelled),
            }
        }
        Ok(total)
    }

    /// The frequent episodes of two or more nodes of `x` mined with `config`, with counts.
    pub(crate) fn mine(
        &self,
        x: &EventStream,
        config: &MinerConfig,
    ) -> Result<Mined, SignificanceError> {
        Ok(self.mine_and_count(x, config, &[])?.0)
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
        self.counted.fetch_add(list.len() as u64, Ordering::Relaxed);
        self.on_counter(x, |counter| Ok(counter.count(CountKind::Exact, list)?))
    }
}

impl Engine<'_> {
    /// `f(s)` for every surrogate `s` of `range`, in order: in parallel on rayon's pool (the
    /// CPU) or on one thread per GPU counter.
    pub(crate) fn map_surrogates<T: Send>(
        &self,
        range: Range<u64>,
        f: impl Fn(u64) -> Result<T, SignificanceError> + Sync + Send,
    ) -> Result<Vec<T>, SignificanceError> {
        use rayon::prelude::*;
        let f = |s| self.check_cancel().and_then(|()| f(s));
        let Kind::Gpu(slots) = &self.kind else {
            return range.into_par_iter().map(f).collect();
        };
        let start = range.start;
        let results: Vec<Mutex<Option<Result<T, SignificanceError>>>> =
            range.clone().map(|_| Mutex::new(None)).collect();
        on_threads(slots.for_passes(), range, |s| {
            let r = f(s);
            let ok = r.is_ok();
            *results[(s - start) as usize].lock() = Some(r);
            ok
        });
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            match r.into_inner() {
                Some(Ok(t)) => out.push(t),
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        Ok(out)
    }

    /// Folds `f(s)` over every surrogate `s` of `range` into `zero` with `add` (partial folds
    /// joined by `merge`: surrogates run in parallel, so `add` and `merge` must not depend on
    /// the order, as integer sums do), so that per-surrogate results are never all held at
    /// once.
    pub(crate) fn fold_surrogates<T: Send, A: Clone + Send + Sync>(
        &self,
        range: Range<u64>,
        zero: A,
        f: impl Fn(u64) -> Result<T, SignificanceError> + Sync + Send,
        add: impl Fn(A, T) -> A + Sync + Send,
        merge: impl Fn(A, A) -> A + Sync + Send,
    ) -> Result<A, SignificanceError> {
        use rayon::prelude::*;
        let f = |s| self.check_cancel().and_then(|()| f(s));
        let Kind::Gpu(slots) = &self.kind else {
            return range
                .into_par_iter()
                .map(f)
                .try_fold(|| zero.clone(), |acc, x| x.map(|x| add(acc, x)))
                .try_reduce(|| zero.clone(), |a, b| Ok(merge(a, b)));
        };
        // One partial fold per thread.
        let threads = slots.for_passes();
        let partial: Vec<Mutex<Result<A, SignificanceError>>> =
            (0..threads).map(|_| Mutex::new(Ok(zero.clone()))).collect();
        let which = AtomicU64::new(0);
        let next = AtomicU64::new(range.start);
        let end = range.end;
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let own = &partial[which.fetch_add(1, Ordering::Relaxed) as usize];
                    loop {
                        let s = next.fetch_add(1, Ordering::Relaxed);
                        if s >= end {
                            break;
                        }
                        let mut acc = own.lock();
                        let Ok(a) = std::mem::replace(&mut *acc, Ok(zero.clone())) else {
                            break;
                        };
                        *acc = f(s).map(|x| add(a, x));
                        if acc.is_err() {
                            next.store(end, Ordering::Relaxed);
                            break;
                        }
                    }
                });
            }
        });
        partial
            .into_iter()
            .map(Mutex::into_inner)
            .try_fold(zero.clone(), |a, b| Ok(merge(a, b?)))
    }

    /// `guided`'s hypotheses counted in hybrids on the GPU (`job`, see
    /// [`crate::device::HybridJob`]; [`super::gpu::hybrid_counts`]): shape
    /// `[hyps × surrogates]`, row by hypothesis. `None` on the CPU (the caller counts them
    /// there). Runs on the first counter's devices, which it holds meanwhile.
    ///
    /// # Errors
    /// A failing device or a malformed job.
    pub(crate) fn hybrid_counts(
        &self,
        job: crate::device::HybridJob,
    ) -> Option<Result<Vec<u32>, DeviceError>> {
        let Kind::Gpu(slots) = &self.kind else {
            return None;
        };
        let mut slot = slots.slot();
        Some(super::gpu::hybrid_counts(slot.gpu.get(), job))
    }
}

/// Whether every episode of `list` is a pair of two distinct units (what
/// [`Engine::count_surrogate_pairs`] counts).
fn pairs_only(list: &[Episode]) -> bool {
    list.iter()
        .all(|e| e.len() == 2 && e.types()[0] != e.types()[1])
}

/// Which of `n_types` units `list`'s episodes use (what [`Surrogates::generate_units`] keeps).
fn units_of(list: &[Episode], n_types: usize) -> Vec<bool> {
    let mut keep = vec![false; n_types];
    for t in list.iter().flat_map(Episode::types) {
        if let Some(k) = keep.get_mut(t.index()) {
            *k = true;
        }
    }
    keep
}

/// Runs `f(s)` for every `s` of `range` on `threads` scoped threads pulling the next index;
/// stops handing out indices once `f` returns false.
fn on_threads(threads: usize, range: Range<u64>, f: impl Fn(u64) -> bool + Sync) {
    let next = AtomicU64::new(range.start);
    let end = range.end;
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let s = next.fetch_add(1, Ordering::Relaxed);
                    if s >= end {
                        break;
                    }
                    if !f(s) {
                        next.store(end, Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::sync::atomic::{AtomicUsize, Ordering as Atomic};
    use std::time::{Duration, Instant};

    use parking_lot::Mutex;

    use super::{CounterCores, Recordings, start_in_order};
    use crate::episode::CpuCounter;
    use crate::event::{Alphabet, EventStream, EventType, Ordering};
    use crate::significance::surrogate::{SurrogateMethod, Surrogates};

    /// `units` units over `n` rounds of 10 ms, unit `u` `u` ms into each round.
    fn stream(units: u32, n: u32) -> EventStream {
        let mut times = Vec::new();
        let mut types = Vec::new();
        for i in 0..n {
            for u in 0..units {
                times.push(f64::from(i) * 0.01 + f64::from(u) * 0.001);
                types.push(EventType(u));
            }
        }
        let labels: Vec<String> = (0..units).map(|u| format!("u{u}")).collect();
        let alphabet = Alphabet::from_labels(labels).unwrap();
        EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).unwrap()
    }

    fn surrogates(x: &EventStream) -> Arc<Surrogates> {
        Arc::new(Surrogates::new(x, SurrogateMethod::Dither { delta_s: 0.005 }, 1, None).unwrap())
    }

    /// The start stream gets the counters' own index; any other recording one index built
    /// once for its surrogates, whichever thread asks, equal to the recording's own; a copy
    /// of the start stream elsewhere in memory is indexed on its own (the same address, not
    /// the same contents, is what says the start stream); entries of dropped surrogates go.
    #[test]
    fn recordings_share_one_index_per_recording() {
        let a = stream(3, 50);
        let b = stream(4, 30);
        let start = Arc::new(CpuCounter::new(&a));
        let recordings = Recordings {
            start: Some((&a, Arc::clone(&start))),
            ..Recordings::default()
        };
        let sa = surrogates(&a);
        assert!(Arc::ptr_eq(&recordings.index(&a, &sa), &start));

        let sb = surrogates(&b);
        let got: Vec<Arc<CpuCounter>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| recordings.index(&b, &sb)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for g in &got {
            assert!(Arc::ptr_eq(g, &got[0]));
        }
        assert!(!Arc::ptr_eq(&got[0], &start));
        let own = CpuCounter::new(&b);
        assert_eq!(got[0].index().all_times(), own.index().all_times());
        assert_eq!(got[0].index().offsets(), own.index().offsets());
        // The 8 handed out and the one kept.
        assert_eq!(Arc::strong_count(&got[0]), 9);

        let copy = a.clone();
        let scopy = surrogates(&copy);
        let other = recordings.index(&copy, &scopy);
        assert!(!Arc::ptr_eq(&other, &start));
        assert_eq!(other.index().all_times(), start.index().all_times());
        assert_eq!(recordings.by_surrogates.lock().len(), 2);

        drop(sb);
        let sb2 = surrogates(&b);
        let again = recordings.index(&b, &sb2);
        assert!(!Arc::ptr_eq(&again, &got[0]));
        assert_eq!(recordings.by_surrogates.lock().len(), 2);
        drop(got);
        assert_eq!(Arc::strong_count(&again), 2);
    }

    /// Starts run `at_once` at a time, never more, and the items come in index order.
    #[test]
    fn starts_run_at_most_at_once_and_list_in_order() {
        let in_flight = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let (out, ended) = start_in_order(15, 4, |i| {
            let now = in_flight.fetch_add(1, Atomic::SeqCst) + 1;
            peak.fetch_max(now, Atomic::SeqCst);
            // The first four wait (5 s at most) until all four are in flight.
            let waited = Instant::now();
            while i < 4
                && in_flight.load(Atomic::SeqCst) < 4
                && waited.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(2 + (i as u64 * 7) % 5));
            in_flight.fetch_sub(1, Atomic::SeqCst);
            Ok::<_, String>(Some(i * 10))
        });
        assert_eq!(out, (0..15).map(|i| i * 10).collect::<Vec<_>>());
        assert!(ended.error.is_none());
        assert_eq!(ended.dropped, 0);
        assert_eq!(peak.load(Atomic::SeqCst), 4);
    }

    /// A start that fails ends the list with the items before it and its error; nothing after
    /// it starts one at a time, and with several at once those started after it are dropped
    /// and counted. A start that gives none ends it without an error.
    #[test]
    fn a_failed_start_ends_the_list_with_those_before_it() {
        let started = Mutex::new(Vec::new());
        let (out, ended) = start_in_order(10, 1, |i| {
            started.lock().push(i);
            if i == 5 {
                Err("memory full")
            } else {
                Ok(Some(i))
            }
        });
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
        assert_eq!(ended.error, Some("memory full"));
        assert_eq!(ended.dropped, 0);
        assert_eq!(*started.lock(), vec![0, 1, 2, 3, 4, 5]);

        let started = Mutex::new(Vec::new());
        let (out, ended) = start_in_order(12, 4, |i| {
            started.lock().push(i);
            std::thread::sleep(Duration::from_millis(1));
            if i == 5 {
                Err("memory full")
            } else {
                Ok(Some(i))
            }
        });
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
        assert_eq!(ended.error, Some("memory full"));
        let started = started.into_inner();
        assert!((0..=5).all(|i| started.contains(&i)), "{started:?}");
        assert_eq!(ended.dropped, started.iter().filter(|&&i| i > 5).count());

        let (out, ended) = start_in_order(6, 3, |i| Ok::<_, String>((i != 2).then_some(i)));
        assert_eq!(out, vec![0, 1]);
        assert!(ended.error.is_none());
    }

    /// Spread: counter `k`'s threads from core `k × workers` (one GPU: counter `k` on core
    /// `k`); first: every counter from core 0; off: unpinned. The variable's values parse,
    /// and any other is given back to be reported.
    #[test]
    fn counter_cores_spread_first_or_off() {
        assert_eq!(CounterCores::parse(None), Ok(CounterCores::Spread));
        assert_eq!(CounterCores::parse(Some("")), Ok(CounterCores::Spread));
        assert_eq!(
            CounterCores::parse(Some("spread")),
            Ok(CounterCores::Spread)
        );
        assert_eq!(
            CounterCores::parse(Some(" first ")),
            Ok(CounterCores::First)
        );
        assert_eq!(CounterCores::parse(Some("off")), Ok(CounterCores::Off));
        assert_eq!(CounterCores::parse(Some("0")), Err("0"));
        let spread: Vec<_> = (0..4)
            .map(|k| CounterCores::Spread.first_core(k, 1))
            .collect();
        assert_eq!(spread, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(CounterCores::Spread.first_core(3, 2), Some(6));
        assert_eq!(CounterCores::First.first_core(3, 2), Some(0));
        assert_eq!(CounterCores::Off.first_core(3, 2), None);
    }
}
