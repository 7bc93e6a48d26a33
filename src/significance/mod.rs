//! Significance of mined episodes: surrogates of the recording ([`surrogate`]), generated with
//! counter-based random numbers ([`philox`]) so that the CPU and the GPU make the same ones,
//! the tests that compare the recording's counts with the surrogates' ([`testing`]: what is
//! tested and how it is adjusted), and their computation in phases over ranges of surrogates
//! ([`phases`]: one process runs them over every surrogate at once; a cluster splits the
//! surrogates and gets the same p-values); [`spectrum`]: the `spectrum` procedure's
//! per-surrogate statistic (the largest count per episode size) by an exact threshold search
//! instead of mining each surrogate; [`sample_split`]: `max-t` with the family selected on the
//! first part of the recording and tested on the rest (surrogates counted, not mined);
//! [`guided`]: significance-guided mining (level `k + 1` extends only the significant
//! `k`-node episodes; the default procedure); [`options`]: a test's options, typed, declared
//! once with their defaults and checked in one place, composed with the mining options
//! ([`MineOptions`]); [`gpu`]: the significance jobs on a GPU counter's devices (the `spectrum` search's
//! one-floor pass, a list's counts in a batch of surrogates); [`job`]: `synfire mine`'s whole
//! job, [`mine`] (resolve the options, choose the device, mine, test) and its steps
//! ([`MineJob`]).

mod engine;
mod error;
pub mod gpu;
pub mod guided;
pub mod job;
pub mod options;
pub mod phases;
pub mod philox;
pub mod rolling;
pub mod sample_split;
pub mod spectrum;
pub mod surrogate;
pub mod testing;

pub use job::{MineJob, MineJobError, Mined, TestOptions, mine};
pub use options::{MineOptions, SignificanceOptions};
pub use phases::{test_episodes, test_episodes_on};
pub use surrogate::{SurrogateError, SurrogateMethod, Surrogates, Trials};
pub use testing::{
    Correction, EpisodeTest, GuidedLevel, Listing, SignificanceConfig, SignificanceError,
    SignificanceResult, SplitSummary, TestStats, check_sample_split, listing,
};
