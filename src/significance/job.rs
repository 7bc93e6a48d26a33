//! The whole job of `synfire mine` in one place: [`mine`] (options in, episodes and their
//! test out) and its steps, [`MineJob`]. The command line, the Python binding, `synfire bench
//! session` and the examples run a recording through here, so the sequence (resolve the
//! options, choose the device and its counter, mine with the test's own mining configuration,
//! test what mining found, list the tested episodes) is written once.
//!
//! It sits in `significance` (layer 3) because it runs both the miner (`episode`, layer 2) and
//! the test; plain mining with a counter of the caller's own stays [`crate::episode::mine_with`].

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::options::SignificanceOptions;
use super::phases::Tester;
use super::testing::{SignificanceConfig, SignificanceError, SignificanceResult};
use crate::device::{DeviceChoice, DeviceError};
use crate::episode::{
    Counter, GpuSettings, MineError, MinerConfig, MiningOptions, MiningResult, NoProgress, NoTest,
    OptionError, Progress, Truncation, mine_with, select_counter,
};
use crate::event::EventStream;

/// The test slot of [`MiningOptions`] a [`MineJob`] reads: none ([`NoTest`], plain
/// `MiningOptions`) or [`SignificanceOptions`] ([`super::MineOptions`]).
pub trait TestOptions {
    /// The test these options describe, every value checked, or `None` where they describe
    /// none.
    ///
    /// # Errors
    /// Every invalid option, named as in the options' document (without the `significance.`
    /// prefix, which [`MineJob::new`] adds).
    fn test_config(&self) -> Result<SignificanceConfig, Vec<OptionError>>;
}

impl TestOptions for NoTest {
    fn test_config(&self) -> Result<SignificanceConfig, Vec<OptionError>> {
        match *self {}
    }
}

impl TestOptions for SignificanceOptions {
    fn test_config(&self) -> Result<SignificanceConfig, Vec<OptionError>> {
        self.config()
    }
}

/// What [`mine`] and [`MineJob::run`] return.
#[derive(Clone, Debug)]
pub struct Mined {
    /// The mining result. With a test, the episodes the test examined beyond those mined
    /// (`guided`'s longer episodes) are listed in it ([`SignificanceResult::list_in`]).
    pub result: MiningResult,
    /// The test's result, where the options asked for one.
    pub significance: Option<SignificanceResult>,
}

/// A mining job that could not run or finish. Each wrapped error displays as itself (with
/// its own source), so a caller's message reads as the failing step's.
#[derive(Debug, thiserror::Error)]
pub enum MineJobError {
    /// Invalid options ([`MineJob::new`]), each named as in the options' document (a test's
    /// as `significance.<field>`).
    #[error("invalid options: {}", join(.0))]
    Options(Vec<OptionError>),
    /// The device asked for could not count ([`DeviceChoice::Gpu`] without a usable GPU, a
    /// bad ordinal, a failed start).
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Mining failed (bad settings for this stream, a counter error, a cancel).
    #[error(transparent)]
    Mine(#[from] MineError),
    /// Mining stopped at a limit before its first level was finished, so no episode could be
    /// tested against surrogates.
    #[error("mining stopped before level 1 finished ({0}): nothing to test against surrogates")]
    NothingToTest(Truncation),
    /// The significance test failed (its settings, the surrogates, a device, a cancel).
    #[error(transparent)]
    Significance(#[from] SignificanceError),
}

fn join(errors: &[OptionError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("; ")
}

/// Mines `stream` as `options` say and, where they carry a test
/// ([`super::MineOptions`]' `significance`), tests the episodes against surrogates: exactly
/// what `synfire mine` does, without its reading and writing. The device is chosen once
/// (`options.device`: `auto` counts on the GPUs of `options.gpus` when there are any, else on
/// the CPU, logged; the counts are the same either way) and serves mining and the test.
///
/// [`MineJob`] runs the same steps one at a time (progress, cancellation, a look at the
/// result between mining and the test); [`crate::episode::mine_with`] mines with a counter
/// of the caller's own.
///
/// # Errors
/// [`MineJobError::Options`] for every invalid option at once (before any work),
/// [`MineJobError::Device`] for `device = gpu` without a usable GPU, [`MineJobError::Mine`]
/// when mining fails, [`MineJobError::NothingToTest`] or [`MineJobError::Significance`] when
/// the test cannot run.
///
/// # Examples
/// ```no_run
/// use synfire::{DeviceChoice, Interval, MiningOptions, Ordering, read_spikes};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let stream = read_spikes("recording.nwb".as_ref(), Ordering::RequireSorted)?;
/// let mut options = MiningOptions::new(&[Interval::new(0.0, 0.005)?]);
/// options.min_count = Some(100);
/// options.device = DeviceChoice::Cpu;
/// let mined = synfire::mine(&stream, &options)?;
/// println!("{} frequent episodes", mined.result.episodes.len());
/// # Ok(())
/// # }
/// ```
pub fn mine<T: TestOptions>(
    stream: &EventStream,
    options: &MiningOptions<T>,
) -> Result<Mined, MineJobError> {
    MineJob::new(stream, options)?.run(&NoProgress)
}

/// [`mine`] one step at a time: the options resolved and the counter chosen
/// ([`MineJob::new`], or [`MineJob::resolved`] from options a caller checked itself),
/// mining ([`MineJob::mine`], with a [`Progress`]), the test ([`MineJob::test`]); or both
/// ([`MineJob::run`]).
pub struct MineJob<'a> {
    stream: &'a EventStream,
    device: DeviceChoice,
    config: MinerConfig,
    settings: GpuSettings,
    test: Option<SignificanceConfig>,
    counter: Box<dyn Counter>,
    cancel: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for MineJob<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MineJob")
            .field("device", &self.device)
            .field("config", &self.config)
            .field("settings", &self.settings)
            .field("test", &self.test)
            .finish_non_exhaustive()
    }
}

impl<'a> MineJob<'a> {
    /// The job `options` describe on `stream`: every option checked, then the counter chosen
    /// (as [`MineJob::resolved`]).
    ///
    /// # Errors
    /// [`MineJobError::Options`] for every invalid option at once (a `calibration` file is
    /// read here, once), [`MineJobError::Device`] as [`MineJob::resolved`].
    pub fn new<T: TestOptions>(
        stream: &'a EventStream,
        options: &MiningOptions<T>,
    ) -> Result<Self, MineJobError> {
        let resolved = options.resolve();
        let test = options.significance.as_ref().map(|t| {
            t.test_config().map_err(|errors| {
                errors
                    .into_iter()
                    .map(|e| OptionError {
                        field: format!("significance.{}", e.field),
                        message: e.message,
                    })
                    .collect::<Vec<_>>()
            })
        });
        let (config, settings, test) = match (resolved, test.transpose()) {
            (Ok((config, settings)), Ok(test)) => (config, settings, test),
            (resolved, test) => {
                let mut errors = resolved.err().unwrap_or_default();
                errors.extend(test.err().unwrap_or_default());
                return Err(MineJobError::Options(errors));
            }
        };
        Ok(Self::resolved(
            stream,
            options.device,
            config,
            settings,
            test,
        )?)
    }

    /// The job of mining `stream` with `config` (and testing the result as `test` says, if
    /// given), counting on `device` set up by `settings` (`auto`: the GPUs when there are any,
    /// else the CPU, logged by [`crate::device::resolve`]): the counter is chosen here
    /// ([`select_counter`]), before any mining. `config`, `settings` and `test` are taken as
    /// checked (`MiningOptions::resolve`, `SignificanceOptions::config` or `test`).
    ///
    /// # Errors
    /// With [`DeviceChoice::Gpu`]: any [`DeviceError`] (no driver, no device, a bad ordinal,
    /// a failed start). `auto` never fails for want of a GPU.
    pub fn resolved(
        stream: &'a EventStream,
        device: DeviceChoice,
        config: MinerConfig,
        settings: GpuSettings,
        test: Option<SignificanceConfig>,
    ) -> Result<Self, DeviceError> {
        let counter = select_counter(stream, &config.intervals, device, &settings)?;
        Ok(Self {
            stream,
            device,
            config,
            settings,
            test,
            counter,
            cancel: None,
        })
    }

    /// The job stopping its test at the next surrogate (or batch of candidates while mining
    /// one) with [`SignificanceError::Cancelled`] once `flag` is set ([`Tester::cancel_on`]):
    /// Ctrl-C in a Python call, say. Mining is cancelled through its [`Progress`]
    /// ([`Progress::cancelled`]).
    #[must_use]
    pub fn cancel_on(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// The stream mined.
    #[must_use]
    pub fn stream(&self) -> &'a EventStream {
        self.stream
    }

    /// The miner configuration (the test's is [`SignificanceConfig::mining_config`] of it).
    #[must_use]
    pub fn config(&self) -> &MinerConfig {
        &self.config
    }

    /// The device asked for (where the test's surrogates are mined and counted too).
    #[must_use]
    pub fn device(&self) -> DeviceChoice {
        self.device
    }

    /// The GPU settings.
    #[must_use]
    pub fn settings(&self) -> &GpuSettings {
        &self.settings
    }

    /// The test, if the job has one.
    #[must_use]
    pub fn test_config(&self) -> Option<&SignificanceConfig> {
        self.test.as_ref()
    }

    /// Mines the stream on the chosen counter, level by level, reporting to `progress`: with
    /// [`MineJob::config`], or with a test, the test's mining configuration
    /// ([`SignificanceConfig::mining_config`]: `guided` mines to two nodes, its longer
    /// episodes come from its own search).
    ///
    /// # Errors
    /// [`MineError`] for settings the stream does not fit, a failing counter, or
    /// [`MineError::Cancelled`] when `progress` asks to stop.
    pub fn mine(&self, progress: &dyn Progress) -> Result<MiningResult, MineError> {
        match &self.test {
            Some(test) => mine_with(
                self.stream,
                &test.mining_config(&self.config),
                self.counter.as_ref(),
                progress,
            ),
            None => mine_with(self.stream, &self.config, self.counter.as_ref(), progress),
        }
    }

    /// Tests `result` (what [`MineJob::mine`] returned) as the job's test says, if it has one,
    /// on the job's device, logging what it does, each warning and the outcome; the episodes
    /// the test examined beyond those mined are listed into `result`
    /// ([`SignificanceResult::list_in`]). A truncated result is tested on the levels it
    /// finished (the surrogates are mined to the same depth, so the family is the same in
    /// both), with a warning.
    ///
    /// # Errors
    /// [`MineJobError::NothingToTest`] when mining stopped before level 1 finished;
    /// [`MineJobError::Significance`] when the test fails (its settings, `trial-shift`
    /// without trials, the surrogates, `gpu` without a usable GPU, a cancel).
    pub fn test(
        &self,
        result: &mut MiningResult,
    ) -> Result<Option<SignificanceResult>, MineJobError> {
        let Some(test) = &self.test else {
            return Ok(None);
        };
        let finished;
        let config = match &result.truncated {
            None => &self.config,
            Some(t) if t.level <= 1 => return Err(MineJobError::NothingToTest(t.clone())),
            Some(t) => {
                tracing::warn!(
                    level = t.level,
                    "Mining was truncated at level {}: testing the finished levels 1 to {} (the surrogates are mined to level {} too).",
                    t.level,
                    t.level - 1,
                    t.level - 1
                );
                finished = MinerConfig {
                    max_level: t.level - 1,
                    ..self.config.clone()
                };
                &finished
            }
        };
        tracing::info!(
            surrogates = %test.method,
            n_surrogates = test.n_surrogates,
            correction = %test.correction,
            "Testing significance against surrogates."
        );
        let started = Instant::now();
        let mut tester = Tester::new(self.stream, config, self.device, &self.settings)?;
        if let Some(flag) = &self.cancel {
            tester = tester.cancel_on(flag.clone());
        }
        let r = tester.run(result, test)?;
        for w in &r.warnings {
            tracing::warn!("{w}");
        }
        tracing::info!(
            tested = r.tested,
            significant = r.tests.iter().filter(|t| t.stats.significant).count(),
            seconds = format!("{:.3}", started.elapsed().as_secs_f64()),
            "Significance tested."
        );
        r.list_in(result);
        Ok(Some(r))
    }

    /// [`MineJob::mine`], then [`MineJob::test`].
    ///
    /// # Errors
    /// As [`MineJob::mine`] ([`MineJobError::Mine`]) and [`MineJob::test`].
    pub fn run(&self, progress: &dyn Progress) -> Result<Mined, MineJobError> {
        let mut result = self.mine(progress)?;
        let significance = self.test(&mut result)?;
        Ok(Mined {
            result,
            significance,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{MineJob, MineJobError, mine};
    use crate::device::DeviceChoice;
    use crate::episode::{Interval, MiningOptions, MiningResult, Threshold};
    use crate::event::{Alphabet, EventStream, EventType, Ordering};
    use crate::significance::{Correction, MineOptions, SignificanceOptions, SurrogateMethod};

    /// Unit 0 fires every 10 ms, unit 1 two ms after it; unit 2 at random-looking times.
    fn stream() -> EventStream {
        let mut times = Vec::new();
        let mut types = Vec::new();
        for i in 0..400u32 {
            let t = f64::from(i) * 0.01;
            times.extend([t, t + 0.002, t + 0.0037 + f64::from(i % 7) * 0.0009]);
            types.extend([EventType(0), EventType(1), EventType(2)]);
        }
        let alphabet = Alphabet::from_labels(["a", "b", "c"]).unwrap();
        EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).unwrap()
    }

    /// `r` without its timings (the levels' seconds).
    fn untimed(mut r: MiningResult) -> MiningResult {
        for l in &mut r.levels {
            l.seconds = 0.0;
        }
        r
    }

    fn options() -> MiningOptions {
        let mut o = MiningOptions::new(&[Interval::new(0.0, 0.003).unwrap()]);
        o.min_count = Some(50);
        o.max_level = 3;
        o.device = DeviceChoice::Cpu;
        o
    }

    #[test]
    fn mine_equals_the_miner_on_the_cpu_counter() {
        let s = stream();
        let o = options();
        let mined = mine(&s, &o).unwrap();
        assert!(mined.significance.is_none());
        let config = o.miner().unwrap();
        assert_eq!(config.threshold, Threshold::MinCount(50));
        assert_eq!(
            untimed(mined.result.clone()),
            untimed(crate::episode::mine(&s, &config).unwrap())
        );
        assert!(mined.result.episodes.iter().any(|f| f.episode.len() == 2));
    }

    #[test]
    fn a_test_in_the_options_is_run_and_its_mining_configuration_used() {
        let s = stream();
        let mut sig = SignificanceOptions::new(SurrogateMethod::Dither { delta_s: 0.015 });
        sig.n_surrogates = 19;
        sig.correction = Correction::MaxT;
        let o: MineOptions = options().with_test(Some(sig.clone()));
        let mined = mine(&s, &o).unwrap();
        let config = o.miner().unwrap();
        let data = crate::episode::mine(&s, &config).unwrap();
        let expected =
            super::super::test_episodes(&s, &config, &data, &sig.config().unwrap()).unwrap();
        let got = mined.significance.unwrap();
        assert!(!got.tests.is_empty());
        assert_eq!(got.tests, expected.tests);
        assert_eq!(untimed(mined.result), untimed(data));
        // `guided` mines to two nodes only, then lists what it tested.
        sig.correction = Correction::Guided;
        let job = MineJob::new(&s, &o.clone().with_test(Some(sig))).unwrap();
        let mined = job.mine(&crate::episode::NoProgress).unwrap();
        assert!(mined.episodes.iter().all(|f| f.episode.len() <= 2));
        assert_eq!(mined.levels.len(), 2);
    }

    #[test]
    fn every_invalid_option_is_named_at_once() {
        let s = stream();
        let mut o = options();
        o.max_level = 0;
        let mut sig = SignificanceOptions::new(SurrogateMethod::Dither { delta_s: 0.015 });
        sig.alpha = 2.0;
        let e = mine(&s, &o.with_test(Some(sig))).unwrap_err();
        let MineJobError::Options(errors) = &e else {
            panic!("{e}");
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["max_level", "significance.alpha"], "{e}");
        assert!(
            e.to_string()
                .contains("`significance.alpha`: must be in (0, 1)"),
            "{e}"
        );
    }

    #[test]
    fn a_run_truncated_before_level_one_finished_has_nothing_to_test() {
        let s = stream();
        let sig = SignificanceOptions::new(SurrogateMethod::Dither { delta_s: 0.015 });
        let mut o: MineOptions = options().with_test(Some(sig));
        o.max_candidates = Some(1);
        let e = mine(&s, &o).unwrap_err();
        assert!(
            matches!(e, MineJobError::NothingToTest(ref t) if t.level == 1),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("mining stopped before level 1 finished ("),
            "{e}"
        );
    }
}
