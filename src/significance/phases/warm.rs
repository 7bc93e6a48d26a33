//! [`WarmCounters`]: the GPU counters a cluster worker keeps between sessions.

use std::sync::Arc;

use crate::device::{DeviceChoice, DeviceError};
use crate::episode::{CpuCounter, GpuCounter, GpuSettings, MinerConfig};
use crate::event::EventStream;
use crate::significance::engine::{CounterCores, first_counter, more_counters};

/// GPU counters a long-lived worker keeps between sessions (a `synfire.cluster` actor): their
/// device threads, CUDA contexts, compiled kernels and calibration stay; each session only
/// reloads its stream, one host index of it shared by every counter
/// ([`GpuCounter::reload_shared`]). Counters are made for one interval table and
/// one set of [`GpuSettings`]; a session with others makes new ones.
#[derive(Default)]
pub struct WarmCounters {
    /// What the counters were made for (intervals and settings), and the counters (empty: the
    /// CPU counts).
    kept: Option<(String, Vec<GpuCounter>)>,
}

impl std::fmt::Debug for WarmCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmCounters")
            .field("counters", &self.kept.as_ref().map_or(0, |(_, c)| c.len()))
            .finish()
    }
}

impl WarmCounters {
    /// No counters yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The GPU counters kept (0: none yet, or the CPU counts).
    #[must_use]
    pub fn gpu_counters(&self) -> usize {
        self.kept.as_ref().map_or(0, |(_, c)| c.len())
    }

    /// Counters holding `stream` for mining with `config` and testing it: the kept ones
    /// (reloaded with `stream`) when they were made for `config`'s intervals and `settings`
    /// with the same `choice`, else new ones as [`test_episodes_on`] makes them (up to four
    /// counters, each on every GPU `settings` names). Empty where the CPU counts (`cpu`, or
    /// `auto` without a usable GPU). Mine with the first (or a [`crate::episode::CpuCounter`]
    /// when empty) and test with [`Tester::with_gpus`] on all of them.
    ///
    /// # Errors
    /// [`DeviceError`] for `gpu` without a usable GPU, or a failed upload (the counters are
    /// then dropped).
    ///
    /// [`test_episodes_on`]: super::test_episodes_on
    /// [`Tester::with_gpus`]: super::Tester::with_gpus
    pub fn load(
        &mut self,
        stream: &EventStream,
        config: &MinerConfig,
        choice: DeviceChoice,
        settings: &GpuSettings,
    ) -> Result<&mut [GpuCounter], DeviceError> {
        let want = format!("{choice:?} {:?} {settings:?}", config.intervals);
        let reuse = matches!(&self.kept, Some((have, _)) if *have == want);
        if reuse {
            let (_, counters) = self.kept.as_mut().expect("kept counters");
            // One host index of `stream` for every counter.
            let recording = Arc::new(CpuCounter::new(stream));
            for c in counters.iter_mut() {
                if let Err(e) = c.reload_shared(stream, Arc::clone(&recording)) {
                    self.kept = None;
                    return Err(e);
                }
            }
        } else {
            self.kept = None;
            let mut counters = Vec::new();
            let cores = CounterCores::from_env();
            if let Some(first) = first_counter(stream, config, choice, settings, cores)? {
                let recording = Arc::clone(first.recording());
                let workers = first.worker_count();
                counters.push(first);
                counters.extend(more_counters(
                    stream, &recording, config, settings, cores, workers,
                ));
            }
            self.kept = Some((want, counters));
        }
        Ok(self
            .kept
            .as_mut()
            .map_or(&mut [][..], |(_, c)| c.as_mut_slice()))
    }
}
