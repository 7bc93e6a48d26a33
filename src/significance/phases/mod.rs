//! The significance test in phases, each over any range of surrogate indices, so that the
//! surrogates of one recording can be split across processes and machines (the Python
//! package's `synfire.cluster`, issue 22) and every p-value still equals the single-process
//! run's bit for bit. [`test_episodes`], [`test_episodes_on`] and a [`Tester`] on GPU counters
//! the caller lends ([`Tester::with_gpus`], a pipeline stage's) are these same phases run over
//! the one range `0..S` ([`Tester::run`]), except a
//! sample-split test ([`SignificanceConfig::sample_split`]), which has no phases and runs whole
//! in one process ([`super::sample_split`]).
//!
//! # Phases
//! A [`Tester`] holds the recording, its mining configuration and the counters (CPU or GPU).
//! [`Tester::plan`] fixes what is tested ([`Plan`]: the settings, the recording's minimum
//! count and its tested episodes with their counts). Then, per procedure
//! ([`super::testing`] defines them):
//!
//! | procedure | first pass, per range ([`Tester::first_pass`]) | between ([`Tester::union`]) | second pass, per range ([`Tester::second_pass`]) |
//! |---|---|---|---|
//! | `max-t` | mine each surrogate: its frequent episodes and counts | `U`, the union of every dataset's frequent episodes, and their counts in the recording | count every episode of `U` in each surrogate (exactly where it was not frequent there): sums, sums of squares, exceedances |
//! | `spectrum` | each surrogate's largest count per episode size, by the exact search of [`super::spectrum`] (equal to mining it); count the tested episodes: sums, sums of squares | — | — |
//! | `spectrum`, [`SignificanceConfig::significant_only`] | each surrogate's largest count per episode size | the significant episodes (from the signatures' p-values) | count the significant episodes in each surrogate: sums, sums of squares |
//! | `fdr-bh`, `holm`, `bonferroni`, `none` | count the tested episodes in each surrogate: sums, sums of squares, exceedances | — | — |
//!
//! [`finish`] combines the parts (the first pass's of every range; with two passes also the
//! union and the second pass's) into the [`SignificanceResult`], with no recording and no
//! counter.
//!
//! `spectrum` decides from the surrogates' largest counts per size alone; each tested
//! episode's counts in the surrogates only make its `surrogate_mean` and `surrogate_std`.
//! With [`SignificanceConfig::significant_only`] those counts are made for the significant
//! episodes only, in a second pass, which is most of the work saved (every tested episode is
//! 10⁴–10⁶ counts per surrogate at level 4, the significant ones a few hundred). The tests it
//! returns equal those of the one-pass run that are significant, bit for bit: the same
//! integers enter the same formulas (`tests/significance_split.rs`).
//!
//! # Why a split gives the same p-values
//! * Surrogate `s` is a pure function of (recording, method, seed, `s`)
//!   ([`super::surrogate`]): any range of indices is made the same anywhere, on any device.
//! * Every per-surrogate quantity a part carries is an integer: counts, their sums (`u64`) and
//!   sums of squares (`u128`), exceedances. Parts combine by integer addition, which is exact
//!   and independent of the order and of where the ranges were cut.
//! * `U` is numbered canonically: the recording's tested episodes first, then each surrogate's
//!   frequent episodes in surrogate order and in its mining order, whatever the ranges.
//! * [`finish`] computes every floating-point value (means, deviations, the statistics `T`, the
//!   maxima `M_s`, the p-values and their adjustments) from the combined integers in one fixed
//!   order, the same code for one range or many; [`Tester::union`] of `spectrum` keeping only
//!   significant episodes chooses them by the same code's p-values.
//!
//! So the result (every field of every [`super::EpisodeTest`], `surrogate_max`, `warnings` and
//! `candidates_counted`) is identical for any partition of `0..S` into ranges
//! (`tests/significance_split.rs` checks it for every procedure, the parts passed through their
//! JSON form).
//!
//! # The JSON form
//! [`Plan`], [`FirstPart`], [`Union`] and [`SecondPart`] have a JSON form (`to_json`,
//! `from_json`) for moving them between processes. An episode is written as its unit indices
//! (into the recording's alphabet) and its gaps' indices into the configuration's intervals.
//! Each carries a fingerprint of the recording, the mining configuration and the plan's
//! settings; a phase refuses a plan or part made for another recording, another configuration
//! or another test ([`SignificanceError::Config`] naming the plan or part), and
//! [`Tester::union`] and [`finish`] refuse ranges that do not cover `0..S` exactly once.
//!
//! # Files
//! Data flows one way, from the tester to the parts' form: `tester.rs` ([`Tester`] and its
//! phases) uses `finish.rs` ([`finish`], per procedure, and the checks of the parts that the
//! union shares), both use `plan.rs` ([`Plan`] and the parts, with their `to_json` /
//! `from_json`), which uses `wire.rs` (the JSON structures, an episode's encoding and the
//! fingerprint, which the tester also takes of its recording); `warm.rs` ([`WarmCounters`])
//! stands apart.
//!
//! [`finish`]: fn@finish

mod finish;
mod plan;
mod tester;
mod warm;
mod wire;

pub use finish::finish;
pub use plan::{FirstPart, Plan, SecondPart, Union};
pub use tester::Tester;
pub use warm::WarmCounters;

use super::error::SignificanceError;
use super::testing::{SignificanceConfig, SignificanceResult};
use crate::device::DeviceChoice;
use crate::episode::{GpuSettings, MinerConfig, MiningResult};
use crate::event::EventStream;

/// Tests the episodes of `data` (the result of mining `stream` with `config`) against
/// surrogates of `stream`. Surrogates are mined (`max-t`) with `config` at the recording's
/// minimum count, searched for their largest count per episode size at that minimum count
/// (`spectrum`, [`super::spectrum`]: the same maxima as mining them), or only counted
/// (per-episode procedures), on the CPU (surrogates in parallel).
///
/// # Errors
/// [`SignificanceError::Config`] for `n_surrogates = 0` or α outside (0, 1); surrogate and
/// mining errors.
pub fn test_episodes(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
) -> Result<SignificanceResult, SignificanceError> {
    test_episodes_on(
        stream,
        config,
        data,
        sig,
        DeviceChoice::Cpu,
        &GpuSettings::default(),
    )
}

/// [`test_episodes`] with the surrogates mined and counted on `device` (`auto`: the GPUs when
/// there are any; GPU counters, one per host core, work on different surrogates at once). The
/// counts, and so every p-value, are the same on either.
///
/// # Errors
/// As [`test_episodes`], and [`SignificanceError::Device`] for `gpu` without a usable GPU.
pub fn test_episodes_on(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    device: DeviceChoice,
    settings: &GpuSettings,
) -> Result<SignificanceResult, SignificanceError> {
    Tester::new(stream, config, device, settings)?.run(data, sig)
}
