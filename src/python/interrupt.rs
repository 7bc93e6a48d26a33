//! Long calls from Python: the work runs on a thread of its own with the GIL released, while
//! the calling thread wakes every [`POLL`] to run Python's signal handlers (Ctrl-C raises
//! `KeyboardInterrupt` there) and to report progress to a Python callable.
//!
//! On an exception (Ctrl-C, or one the progress callable raises) the call returns it at once
//! and sets the work's cancel flag: mining ([`MineProgress`]) stops at its next batch of
//! candidates and the significance test ([`crate::significance::phases::Tester::cancel_on`])
//! at its next surrogate or batch, and return nothing; work without a cancellation hook (the
//! sensor stages) runs to its end on its thread and its result is dropped. Either way
//! nothing is left half-written: a later call starts afresh.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;
use pyo3::prelude::*;

use super::SynfireError;
use crate::episode::{LevelStats, Progress};

/// How often the calling thread wakes to check for Ctrl-C and report progress.
pub(super) const POLL: Duration = Duration::from_millis(50);

/// Runs `work` on a new thread with the GIL released and waits for it, waking every
/// [`POLL`] to run Python's signal handlers and then `tick` (with the GIL), and once more
/// after the work is done. The first exception either raises is returned at once, after
/// setting `cancel`; the work's result is then dropped when it arrives. A panic in `work`
/// becomes a `SynfireError` with its message.
///
/// # Errors
/// The exception of a signal handler (`KeyboardInterrupt`) or of `tick`, a `SynfireError`
/// when the thread cannot be started or the work panics, or the work's own error.
pub(super) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    cancel: &Arc<AtomicBool>,
    mut tick: impl FnMut(Python<'_>) -> PyResult<()>,
    work: impl FnOnce() -> PyResult<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = crossbeam_channel::bounded::<std::thread::Result<PyResult<T>>>(1);
    std::thread::Builder::new()
        .name("synfire-python-call".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            // The caller may have returned (Ctrl-C); then nobody listens.
            let _ = tx.send(result);
        })
        .map_err(|e| SynfireError::new_err(format!("starting a worker thread: {e}")))?;
    let interrupted = |e: PyErr| {
        cancel.store(true, Ordering::SeqCst);
        e
    };
    loop {
        match py.detach(|| rx.recv_timeout(POLL)) {
            Ok(Ok(result)) => {
                tick(py).map_err(interrupted)?;
                return result;
            }
            Ok(Err(panic)) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                return Err(SynfireError::new_err(format!(
                    "internal error (please report it): {message}"
                )));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(SynfireError::new_err(
                    "internal error (please report it): the worker thread ended without a result",
                ));
            }
            Err(RecvTimeoutError::Timeout) => {
                py.check_signals().map_err(interrupted)?;
                tick(py).map_err(interrupted)?;
            }
        }
    }
}

/// What the calling thread has not reported yet.
#[derive(Default)]
struct Pending {
    /// Each level's start `(level, 0, work)` and end `(level, done, work)`, in order.
    events: Vec<(usize, u64, u64)>,
    /// The level in progress: `(level, done, work)`.
    current: Option<(usize, u64, u64)>,
}

/// A mining run's [`Progress`] for Python: the miner (on its thread) records each level's
/// start, advance and end; [`MineProgress::report`] (on the calling thread) hands them to a
/// callable `(level, done, total)`; the cancel flag stops the miner.
pub(super) struct MineProgress {
    cancel: Arc<AtomicBool>,
    pending: Mutex<Pending>,
    /// The last `(level, done)` reported (reports only move forward).
    last: Mutex<Option<(usize, u64)>>,
}

impl MineProgress {
    /// Progress that stops the run once `cancel` is set.
    pub(super) fn new(cancel: Arc<AtomicBool>) -> Self {
        Self {
            cancel,
            pending: Mutex::default(),
            last: Mutex::default(),
        }
    }

    /// Calls `callback(level, done, total)` for what happened since the last report: each
    /// level's start and end, then the level in progress; `(level, done)` strictly increases
    /// from one call to the next, and `done ≤ total`.
    ///
    /// # Errors
    /// The callable's exception.
    pub(super) fn report(&self, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        let (events, current) = {
            let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            (std::mem::take(&mut p.events), p.current)
        };
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        for (level, done, total) in events.into_iter().chain(current) {
            let done = done.min(total);
            if last.is_some_and(|l| l >= (level, done)) {
                continue;
            }
            *last = Some((level, done));
            callback.call1((level, done, total))?;
        }
        Ok(())
    }
}

impl Progress for MineProgress {
    fn level_started(&self, level: usize, work: u64) {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.events.push((level, 0, work));
        p.current = Some((level, 0, work));
    }

    fn advanced(&self, n: u64) {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = &mut p.current {
            c.1 += n;
        }
    }

    fn level_finished(&self, _stats: &LevelStats) {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = p.current {
            p.events.push(c);
        }
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}
