//! Where a computation runs (`--device auto|cpu|gpu`, `device = "…"` in pipelines), and the one
//! policy every domain applies to that choice ([`resolve`]).
//!
//! * `Cpu`: the CPU reference path; no GPU is looked for.
//! * `Gpu`: the GPU path; no usable GPU is an error, never a silent CPU run.
//! * `Auto`: the GPU path when it starts, else the CPU. The fallback is an INFO line logged once
//!   per process for each work kind and reason (live pipelines resolve per window, so a line
//!   per call would flood the log); the answer does not depend on the path.
//!
//! What a domain does when a GPU that *did* start fails later (switch to the CPU for the rest
//! of the run, or fail with `Gpu`) is its own business: this module only decides the start.

use std::collections::HashSet;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Where to compute (`--device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceChoice {
    /// Every GPU found (or those listed), else the CPU with one log line.
    #[default]
    Auto,
    /// The CPU reference counter.
    Cpu,
    /// GPUs only: no GPU is an error.
    Gpu,
}

impl DeviceChoice {
    /// This choice on GPU `gpu` (a CUDA ordinal; `None`: the first GPU).
    #[must_use]
    pub const fn on(self, gpu: Option<usize>) -> DeviceTarget {
        DeviceTarget { choice: self, gpu }
    }

    /// The choice a long-lived user (a pipeline stage) keeps: `Auto` becomes `Cpu` when no GPU
    /// can be probed (logged through [`resolve`], naming `what`); `Cpu` and `Gpu` are kept
    /// as they are (a `Gpu` user reports the missing GPU when it first needs it).
    #[must_use]
    pub fn settle(self, what: &'static str) -> Self {
        if self != Self::Auto {
            return self;
        }
        match resolve(self, what, super::probe) {
            Ok(Some(_)) => self,
            Ok(None) | Err(_) => Self::Cpu,
        }
    }
}

/// A [`DeviceChoice`] and, for the GPU path, which GPU: what every single-GPU entry point takes,
/// as `device: impl Into<DeviceTarget>` (`motif::find_motifs`, `shapelet::train`,
/// `search::Searcher::new`, `search::IncrementalIndex::{knn, knn_batch}`,
/// `softdtw::gpu::worker_on`, whose worker the `softdtw::gpu` functions take), so a plain
/// [`DeviceChoice`] (the first GPU) and a choice on one ordinal (`DeviceChoice::Gpu.on(Some(1))`)
/// are passed alike. Entry points that spread over several GPUs take a [`DeviceChoice`] and
/// their GPU list apart (episode mining and the significance test: `episode::GpuSettings::gpus`,
/// through `episode::select_counter` and `significance::test_episodes_on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceTarget {
    /// CPU, GPU or either.
    pub choice: DeviceChoice,
    /// CUDA ordinal of the GPU (`--gpus`); `None`: the first GPU found.
    pub gpu: Option<usize>,
}

impl From<DeviceChoice> for DeviceTarget {
    fn from(choice: DeviceChoice) -> Self {
        choice.on(None)
    }
}

impl DeviceTarget {
    /// [`resolve`] with this target's choice, handing the GPU ordinal to `start`.
    ///
    /// # Errors
    /// As [`resolve`]: `start`'s error when the choice is [`DeviceChoice::Gpu`].
    pub fn resolve<G, E: Display>(
        self,
        what: &'static str,
        start: impl FnOnce(Option<usize>) -> Result<G, E>,
    ) -> Result<Option<G>, E> {
        let gpu = self.gpu;
        resolve(self.choice, what, move || start(gpu))
    }
}

/// The one device policy: `Ok(Some(gpu))` where the GPU path runs (`start` succeeded, with
/// `Gpu` or `Auto`), `Ok(None)` where the CPU runs (`Cpu`, or `Auto` when `start` failed:
/// logged at INFO once per process for each (`what`, reason)), `Err` with `Gpu` when `start`
/// failed. `start` is not called for `Cpu`. `what` names the work in the log line, e.g.
/// `"motif search"`.
///
/// # Errors
/// `start`'s error, only with [`DeviceChoice::Gpu`].
pub fn resolve<G, E: Display>(
    choice: DeviceChoice,
    what: &'static str,
    start: impl FnOnce() -> Result<G, E>,
) -> Result<Option<G>, E> {
    match choice {
        DeviceChoice::Cpu => Ok(None),
        DeviceChoice::Gpu => start().map(Some),
        DeviceChoice::Auto => match start() {
            Ok(g) => Ok(Some(g)),
            Err(e) => {
                log_fallback(what, &e);
                Ok(None)
            }
        },
    }
}

/// Logs `Auto`'s fall back to the CPU once per process for each (`what`, reason).
fn log_fallback(what: &'static str, reason: &dyn Display) {
    static LOGGED: OnceLock<Mutex<HashSet<(&'static str, String)>>> = OnceLock::new();
    let reason = reason.to_string();
    let first = LOGGED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((what, reason.clone()));
    if first {
        tracing::info!(reason = %reason, "No usable GPU; {what} runs on the CPU.");
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceChoice, DeviceTarget, resolve};

    #[test]
    fn resolve_applies_the_choice() {
        let ok = || Ok::<_, String>(7);
        let bad = || Err::<u32, _>("no GPU".to_owned());
        assert_eq!(resolve(DeviceChoice::Gpu, "test", ok), Ok(Some(7)));
        assert_eq!(resolve(DeviceChoice::Auto, "test", ok), Ok(Some(7)));
        assert_eq!(resolve(DeviceChoice::Auto, "test", bad), Ok(None));
        assert_eq!(
            resolve(DeviceChoice::Gpu, "test", bad),
            Err("no GPU".to_owned())
        );
        let never = || -> Result<u32, String> { panic!("Cpu must not start the GPU") };
        assert_eq!(resolve(DeviceChoice::Cpu, "test", never), Ok(None));
    }

    #[test]
    fn a_target_hands_its_ordinal_to_the_start() {
        let t = DeviceChoice::Gpu.on(Some(3));
        assert_eq!(t.resolve("test", Ok::<_, String>), Ok(Some(Some(3))));
        let plain: DeviceTarget = DeviceChoice::Auto.into();
        assert_eq!(plain.gpu, None);
        assert_eq!(plain.choice, DeviceChoice::Auto);
    }
}
