//! Frequent serial-episode mining with inter-event constraints.
//!
//! * [`model`]: episodes and delay intervals;
//! * [`count`]: the exact CPU counters (Algorithm 1, PreElim = Algorithm 3), the specification;
//! * [`counter`]: the counting back-end interface and the multi-threaded CPU back end;
//! * [`gpu`]: the GPU back end (device threads, PreElim, PTPE and MTPE kernels);
//! * [`mtpe`]: MTPE (segments, free machines, exact tuple merge), the CPU reference of the
//!   GPU's MTPE kernels;
//! * [`hybrid`]: the PTPE/MTPE choice by Eq. 3 and its per-device calibration;
//! * [`calibrate`]: measuring a GPU model's crossover table, and finding it once per process
//!   (cached in the user's cache folder, shipped, or measured on first use);
//! * [`incremental`]: counts of a sliding window's candidates from the previous window's
//!   chains of occurrence ends (exactly the counts from scratch);
//! * [`ends`]: occurrence ends, the exact count one node at a time (the CPU's fast exact
//!   counter, equal to Algorithm 1);
//! * [`bound`]: sound upper bounds that remove join candidates before any count;
//! * [`candidates`]: level-wise candidate generation, lazy and bounded;
//! * [`miner`]: the level-wise miner, one-pass or two-pass (Algorithm 4);
//! * [`memory`]: the memory budget a run checks (`--memory-budget`), resident and available
//!   memory;
//! * [`sanity`]: warnings for results that look wrong (a span or rate outside physiology, a
//!   threshold above every count);
//! * [`options`]: every option of `synfire mine` in one type, shared by the command line, the
//!   pipeline stage and the library.
//!
//! # References
//! Cao, Patnaik, Ponce, Archuleta, Ramakrishnan, Feng, "Towards real-time data mining of
//! spike train datasets using GPUs" (`papers/frequent-episodes-gpu-spike-trains.txt`).

pub mod bound;
pub mod calibrate;
pub mod candidates;
pub mod count;
pub mod counter;
pub mod ends;
pub mod gpu;
pub mod hybrid;
pub mod incremental;
pub mod memory;
pub mod miner;
pub mod model;
pub mod mtpe;
pub mod online;
pub mod options;
pub mod pairs;
pub mod sanity;

pub use count::{TypeIndex, count_exact, count_pair, count_preelim, occurrences};
pub use counter::{CountError, CountKind, Counter, CpuCounter};
pub use ends::{Ends, count_by_ends};
pub use gpu::{GpuCounter, GpuSettings, GpuStats, select_counter, select_gpu};
pub(crate) use gpu::{log_counting, start_gpu};
pub use incremental::{ChainCache, IncrementalCounter};
pub use memory::MemoryBudget;
pub use miner::{
    FrequentEpisode, LevelStats, MineError, MinerConfig, MiningResult, NoProgress, Progress,
    StopReason, Strategy, SupportPer, Threshold, Truncation, mine, mine_with,
};
pub use model::{Episode, EpisodeParseError, Given, Interval, IntervalError, IntervalUnit};
pub use online::{Detector, DetectorError, DetectorStats, OnlineOccurrence, WatchEpisode};
pub use options::{IntervalSpec, MiningOptions, NoTest, OptionError};
