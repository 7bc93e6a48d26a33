//! # synfire
//!
//! Mines neural spike trains and sensor streams, on the CPU (the exact reference) and on
//! NVIDIA GPUs (results equal to the CPU's), from archives and live:
//!
//! * frequent serial episodes `A → B → C` with inter-event delay intervals, counted by
//!   non-overlapped occurrences (PreElim, then exact counts by PTPE or MTPE on GPUs;
//!   [`episode`]), within a memory budget ([`episode::memory`]);
//! * their significance against surrogates of the recording (dithering, ISI dithering,
//!   shifts), with family-wise (`max-t`, SPADE's pattern spectrum) or per-episode (FDR,
//!   Holm, Bonferroni) error control ([`significance`]);
//! * exact top-k motifs of a series ([`motif`]), exact k-NN similarity search over iSAX
//!   indexes ([`search`], SING), shapelet decision trees ([`shapelet`]), soft-DTW values,
//!   gradients and barycenters ([`softdtw`]);
//! * live pipelines that run those as stages over windows of a ZeroMQ or archived stream
//!   ([`live`]);
//! * reports (text, JSON, NWB; [`report`]) and figures (PNG, SVG; [`plot`]).
//!
//! Layers, lowest first (`ARCHITECTURE.md`; `tests/architecture.rs` checks that no module
//! imports above its layer and that no import cycle exists):
//!
//! | layer | modules |
//! |---|---|
//! | 0 model | [`record`], [`event`] |
//! | 1 foundations | [`device`] (the only module that talks to CUDA), [`ingest`] (readers and decoders), [`synth`] (seeded generators) |
//! | 2 mining and series | [`episode`], [`series`] |
//! | 3 methods | [`motif`], [`softdtw`], [`shapelet`], [`significance`] |
//! | 4 | [`search`], [`report`], [`plot`] |
//! | 5 runtime | [`live`] |
//! | 6 bindings | `python` (the extension module `synfire._synfire`, cargo feature `python`) |
//!
//! Where work runs is said one way ([`DeviceTarget`]): every entry point that runs on one GPU
//! takes `device: impl Into<DeviceTarget>` ([`find_motifs`], [`train`], [`Searcher::new`],
//! [`softdtw::gpu::worker_on`]), so a [`DeviceChoice`] (`Auto`, `Cpu`, `Gpu`; the first GPU)
//! or a choice on one GPU (`DeviceChoice::Gpu.on(Some(1))`) is passed alike; mining and the
//! significance test spread over several GPUs and take a [`DeviceChoice`] with their GPU list
//! in [`episode::GpuSettings`] (the options' `device` and `gpus`). `Auto` without a GPU logs
//! one line and runs on the CPU; `Gpu` without one is an error ([`device::resolve`]).
//!
//! Mining a recording is one call, [`mine`] (`synfire mine` without its files): it checks
//! the options ([`MiningOptions`], or [`MineOptions`] with a significance test), chooses the
//! device and its counter, mines and, where the options ask, tests the episodes against
//! surrogates. [`significance::MineJob`] runs the same steps one at a time (a progress
//! callback, cancellation); below it, [`episode::select_counter`] and [`mine_with`] mine with a
//! counter of the caller's own, and [`significance::phases::Tester`] tests on counters the
//! caller keeps.
//!
//! The entry points are re-exported here:
//!
//! ```no_run
//! use synfire::{DeviceChoice, Interval, MiningOptions, Ordering, read_spikes};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let stream = read_spikes(
//!     "fixtures/spikes/A2929-200711/A2929-200711.nwb".as_ref(),
//!     Ordering::RequireSorted,
//! )?;
//! let mut options = MiningOptions::new(&[Interval::new(0.0, 0.005)?]);
//! options.min_count = Some(100);
//! options.device = DeviceChoice::Cpu;
//! let mined = synfire::mine(&stream, &options)?;
//! println!("{} frequent episodes", mined.result.episodes.len());
//! # Ok(())
//! # }
//! ```

// Internals are `pub(crate)`: a `pub` item must be reachable from the crate's root.
#![warn(unreachable_pub)]

pub mod device;
pub mod episode;
pub mod event;
pub mod ingest;
pub mod live;
pub mod motif;
pub mod plot;
#[cfg(feature = "python")]
mod python;
pub mod record;
pub mod report;
pub mod search;
pub mod series;
pub mod shapelet;
pub mod significance;
pub mod softdtw;
pub mod synth;

pub use device::{DeviceChoice, DeviceTarget};
pub use episode::{Interval, MinerConfig, MiningOptions, MiningResult, Threshold, mine_with};
pub use event::{EventStream, Ordering};
pub use ingest::read_spikes;
pub use live::config::PipelineConfig;
pub use live::{RunOptions, RunSummary, run as run_pipeline};
pub use motif::{MotifConfig, find_motifs};
pub use search::{Index, Searcher};
pub use series::read_dataset;
pub use shapelet::{ShapeletConfig, ShapeletTree, TrainingSet, train};
pub use significance::{MineOptions, Mined, mine};
pub use softdtw::{barycenter, paired, pairwise};
