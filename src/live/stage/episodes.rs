//! Frequent-episode mining per spike window: the level-wise miner of `synfire mine`
//! (Cao et al., Algorithm 4: PreElim, then exact counts), on the CPU or the GPUs.
//!
//! Each window becomes the canonical stream of its events
//! ([`EventStream::from_labelled`]), exactly what `synfire mine --start-s S --end-s E` builds
//! from an archive, so a live window and the offline command return the same episodes. The
//! GPU counter (device threads, contexts) is created at the first window and kept: later
//! windows only upload their events. A device failure switches the stage to the CPU with one
//! warning (`device = "auto"`) or fails the window (`device = "gpu"`).
//!
//! On the CPU, every level from 2 on (level 2, every ordered pair of frequent units × every
//! interval, is most of a window's work) is counted incrementally from the previous window's
//! chains of occurrence ends ([`ChainCache`]): a window one hop later recounts only its first
//! occurrences and the events of the last hop, with counts exactly equal to counting the window
//! from scratch (the argument is in [`crate::episode::incremental`]); windows that do not
//! overlap as expected are counted from scratch. The stage asks for previews of open windows
//! and mines each (with the preview's own threshold, results discarded) only to warm the
//! chains, so the first window of a stream (or of a restarted publisher) is not counted from
//! scratch either.
//!
//! With a `significance` table (`[stages.<name>.significance]`, the options of `synfire mine
//! --surrogates …`, 19 surrogates by default) every window's episodes are tested against
//! surrogates of that window's events. With the default `guided`, windows are tested as
//! [`crate::significance::rolling`] says, on the CPU: each window's test part against a
//! family selected on an earlier window's selection part (selected again in the background
//! every half window, so a window costs only its test), the window mined to one node only
//! (its units' counts and the threshold), and the result lists the units and the tested
//! family, each with its exact count in the window (not the window's frequent pairs, a
//! million in a dense window). With `max-t` and the other procedures each window is tested
//! on its own ([`crate::significance::test_episodes`], on the stage's GPU counter when it has
//! one, lent to `phases::Tester::with_gpus`, else on the CPU; `max-t` mines each surrogate
//! like the window). The result carries the `significance` summary and each tested episode
//! its `surrogate_mean`, `surrogate_std`, `statistic`, `p_value`, `p_adjusted` and
//! `significant`, as `synfire mine`'s JSON.

use serde::{Deserialize, Serialize};

use super::{AnyStage, Stage, StageBuilder, StageConfig, StageError};
use crate::device::DeviceChoice;
use crate::episode::{
    ChainCache, Counter, GpuCounter, GpuSettings, LevelStats, MinerConfig, NoProgress, mine_with,
    select_gpu,
};
use crate::event::EventStream;
use crate::live::config::section::ConfigError;
use crate::live::window::{Window, WindowConfig, WindowData};
use crate::record::StreamKind;
use crate::report::{EpisodeJson, MineReport, SignificanceJson};
use crate::significance::rolling::RollingGuided;
use crate::significance::{
    Correction, MineOptions, SignificanceConfig, listing, phases::Tester, test_episodes,
};

/// `[stages.<name>]` with `kind = "episodes"`: the options of `synfire mine`, its significance
/// test included ([`MineOptions`], same names and defaults).
pub type EpisodesConfig = MineOptions;

impl StageConfig for MineOptions {
    const KIND: &'static str = "episodes";
    const INPUT: StreamKind = StreamKind::Spikes;

    fn validate(&self, _window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let resolved = self
            .resolve()
            .map_err(|list| {
                errors.extend(
                    list.into_iter()
                        .map(|e| ConfigError::new(e.field, e.message)),
                );
            })
            .ok();
        let significance =
            match &self.significance {
                Some(options) => options
                    .config()
                    .map_err(|list| {
                        errors.extend(list.into_iter().map(|e| {
                            ConfigError::new(format!("significance.{}", e.field), e.message)
                        }));
                    })
                    .ok(),
                None => None,
            };
        match resolved {
            Some((config, settings)) if errors.is_empty() => Ok(Box::new(EpisodesBuilder {
                config,
                device: self.device,
                settings,
                significance,
            })),
            _ => Err(errors),
        }
    }
}

/// A validated episodes stage.
#[derive(Debug)]
struct EpisodesBuilder {
    config: MinerConfig,
    device: DeviceChoice,
    settings: GpuSettings,
    /// The test (only significant episodes kept when its `significant_only` is set).
    significance: Option<SignificanceConfig>,
}

impl StageBuilder for EpisodesBuilder {
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        let mut stage = EpisodeStage::new(self.config.clone(), self.device, self.settings.clone())?;
        if let Some(sig) = &self.significance {
            stage = stage.with_significance(sig.clone());
        }
        Ok(Box::new(stage))
    }
}

/// One spike window's result (`kind = "episodes"`): what `synfire mine --start-s --end-s`
/// reports for the window's events, in the `synfire mine` JSON schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodesResult {
    /// Who counted: `"cpu"` (the incremental counter) or the GPU counter's name.
    pub device: String,
    /// The minimum count (non-overlapped occurrences) the threshold resolved to for this
    /// window.
    pub min_count: u64,
    /// Event types (units) in the window.
    pub event_types: usize,
    /// Per-level statistics, level 1 first (`seconds`: wall-clock seconds of the level).
    pub levels: Vec<LevelStats>,
    /// The significance test of the window's episodes (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<SignificanceJson>,
    /// The frequent episodes, level 1 included (`intervals_s` in seconds; with a significance
    /// test, each tested one with its statistics; with `significant_only`, only those).
    pub episodes: Vec<EpisodeJson>,
    /// Present only when `max_candidates`, `time_budget_s` or `memory_budget` (on by
    /// default) stopped this window's mining:
    /// `levels` and `episodes` are then the finished levels (as `synfire mine`'s JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<crate::episode::Truncation>,
}

/// The episode-mining stage.
pub struct EpisodeStage {
    config: MinerConfig,
    device: DeviceChoice,
    settings: GpuSettings,
    gpu: Option<GpuCounter>,
    /// The previous window's (or preview's) chains of occurrence ends (CPU counting only).
    chains: ChainCache,
    /// The significance test of each window and whether only significant episodes are kept.
    significance: Option<SignificanceConfig>,
    /// `guided`: the families selected on earlier windows (`significance::rolling`).
    rolling: Option<RollingGuided>,
}

impl std::fmt::Debug for EpisodeStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpisodeStage")
            .field("config", &self.config)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl EpisodeStage {
    /// A stage mining with `config` on `device`.
    ///
    /// With a GPU device choice, the GPU workers start here (once per pipeline).
    ///
    /// # Errors
    /// [`StageError::Mine`] for settings `synfire mine` would refuse; [`StageError::Device`]
    /// for `device = "gpu"` without a usable GPU.
    pub fn new(
        config: MinerConfig,
        device: DeviceChoice,
        settings: GpuSettings,
    ) -> Result<Self, StageError> {
        config.validate()?;
        let mut stage = Self {
            config,
            device,
            settings,
            gpu: None,
            chains: ChainCache::new(),
            significance: None,
            rolling: None,
        };
        if device != DeviceChoice::Cpu {
            // Start the device threads (contexts, NVRTC modules) now, on a one-event stream,
            // so that the first window does not pay for it; windows then only upload.
            let warm_up = EventStream::from_labelled([(0.0, "warm-up")])?;
            stage.gpu = select_gpu(&warm_up, &stage.config.intervals, device, &stage.settings)?;
        }
        Ok(stage)
    }

    /// Tests every window's episodes with `config` (each window's own surrogates); with
    /// its `significant_only` a window's result lists only the significant episodes.
    ///
    /// With `guided` (the default procedure) the windows are tested as
    /// [`crate::significance::rolling`] says: each window's test part against a family
    /// selected on an earlier window's selection part (selected again in the background
    /// every half window), on the CPU; a window is then mined to one node only (its units'
    /// counts and the threshold) and lists its units and the tested family, each with its
    /// exact count in the window, not the window's frequent pairs.
    #[must_use]
    pub fn with_significance(mut self, config: SignificanceConfig) -> Self {
        if config.correction == Correction::Guided {
            self.rolling = Some(RollingGuided::new());
            if self.gpu.take().is_some() {
                tracing::info!(
                    "The episodes stage's guided test counts its small families on the CPU; its GPU is released."
                );
            }
        }
        self.significance = Some(config);
        self
    }

    /// What a window is mined with: the stage's configuration; for `guided` significance the
    /// same to one node only (the units' counts and the threshold: the tested episodes come
    /// from the rolling guided test, and mining every frequent pair of a dense window is
    /// what it avoids); for the other procedures [`SignificanceConfig::mining_config`].
    fn mining_config(&self) -> MinerConfig {
        match &self.significance {
            Some(_) if self.rolling.is_some() => MinerConfig {
                max_level: 1,
                ..self.config.clone()
            },
            Some(sig) => sig.mining_config(&self.config),
            None => self.config.clone(),
        }
    }

    fn prepare_gpu(&mut self, stream: &EventStream) -> Result<(), StageError> {
        if let Some(gpu) = &mut self.gpu
            && let Err(e) = gpu.reload(stream)
        {
            if self.device == DeviceChoice::Gpu {
                return Err(e.into());
            }
            tracing::warn!(error = %e, "GPU upload failed; the episode stage counts on the CPU from now on.");
            self.gpu = None;
        }
        Ok(())
    }
}

impl Stage for EpisodeStage {
    type Result = EpisodesResult;

    fn input(&self) -> StreamKind {
        StreamKind::Spikes
    }

    /// On the CPU, where previews warm the chains.
    fn wants_previews(&self) -> bool {
        self.gpu.is_none() && self.mining_config().max_level >= 2
    }

    /// Mines the open window's events so far (with their own threshold) through the chain
    /// cache and keeps only the chains, for the window's close. Nothing is reported; a failure
    /// just leaves the cache empty.
    fn preview(&mut self, window: &Window) {
        if !Stage::wants_previews(self) {
            return;
        }
        let Ok(stream) = window_stream(window) else {
            return;
        };
        let config = self.mining_config();
        let counter = self.chains.counter(&stream);
        if mine_with(&stream, &config, &counter, &NoProgress).is_ok() {
            counter.finish();
        }
    }

    fn process(&mut self, window: &Window) -> Result<EpisodesResult, StageError> {
        let stream = window_stream(window)?;
        self.prepare_gpu(&stream)?;
        let config = self.mining_config();
        let mut incremental = None;
        let counter: &dyn Counter = if let Some(g) = &self.gpu {
            g
        } else {
            incremental.insert(self.chains.counter(&stream))
        };
        let device = counter.name().to_owned();
        let result = mine_with(&stream, &config, counter, &NoProgress)?;
        if let Some(counter) = incremental {
            counter.finish();
        }
        if self.gpu.as_ref().is_some_and(GpuCounter::has_failed) {
            // The counter recounted on the CPU what the GPU could not: the counts are exact.
            if self.device == DeviceChoice::Gpu {
                return Err(crate::device::DeviceError::Unsupported(
                    "a GPU failed during the window (see the log)".into(),
                )
                .into());
            }
            self.gpu = None;
        }
        let (significance, episodes) = match &self.significance {
            // A truncated window would be tested against surrogates mined to a different
            // depth: it is reported untested (its `truncated` says why).
            Some(sig) if result.truncated.is_none() => {
                // On the stage's GPU when it counts there (reloaded with the window after).
                let tested = match (&mut self.rolling, &mut self.gpu) {
                    (Some(rolling), _) => rolling.test(&stream, &self.config, &result, sig)?,
                    (None, Some(gpu)) => {
                        // The stage's counter, lent: it is reloaded with each surrogate.
                        let tested =
                            Tester::with_gpus(&stream, &self.config, std::slice::from_mut(gpu))
                                .run(&result, sig)?;
                        gpu.reload(&stream)?;
                        tested
                    }
                    (None, None) => test_episodes(&stream, &self.config, &result, sig)?,
                };
                // `guided`'s tested episodes beyond what the window's mining listed.
                let mut result = result.clone();
                tested.list_in(&mut result);
                let report = MineReport::new("", &stream, &self.config, &result);
                let list = listing(&result, Some(&tested), sig.significant_only, false);
                let report = report.annotated(Some(&tested), &list);
                (report.significance, report.episodes)
            }
            _ => (
                None,
                MineReport::new("", &stream, &self.config, &result).episodes,
            ),
        };
        Ok(EpisodesResult {
            device,
            min_count: result.min_count,
            event_types: stream.alphabet().len(),
            levels: result.levels,
            significance,
            episodes,
            truncated: result.truncated,
        })
    }
}

/// The canonical stream of a spike window (what `synfire mine --start-s --end-s` builds).
fn window_stream(window: &Window) -> Result<EventStream, StageError> {
    let WindowData::Spikes {
        times,
        units,
        names,
    } = &window.data
    else {
        return Err(StageError::WrongInput {
            expected: StreamKind::Spikes,
            got: StreamKind::Sensor,
        });
    };
    Ok(EventStream::from_labelled(times.iter().zip(units).map(
        |(&t, &u)| (t, names.get(u as usize).map_or("?", |n| &**n)),
    ))?)
}

/// [`window_stream`] for the stage tests.
#[cfg(test)]
pub(super) fn tests_window_stream(window: &Window) -> EventStream {
    window_stream(window).expect("a spike window")
}
