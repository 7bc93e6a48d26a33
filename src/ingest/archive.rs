//! The archive source: replays an NWB file (units table, or one `TimeSeries`) onto a ring,
//! as fast as possible or paced at real time × `speed`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::IngestError;
use crate::buffer::{EndReason, Record, RingProducer};
use crate::event::{EventStream, Ordering};

/// What an archive source reads.
#[derive(Clone, Debug, PartialEq)]
pub enum ArchiveContent {
    /// The NWB units table (or a `label,time` CSV).
    Units,
    /// The NWB time series at this HDF5 path, in frames of `frame_samples` samples.
    Series {
        /// HDF5 path, e.g. `/acquisition/CompassDirection/rz`.
        dataset: String,
        /// Samples per frame pushed onto the ring.
        frame_samples: usize,
    },
}

/// Settings of an archive source.
#[derive(Clone, Debug)]
pub struct ArchiveSource {
    /// Source name.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// What to read.
    pub content: ArchiveContent,
    /// `None`: as fast as possible; `Some(k)`: real time × k.
    pub speed: Option<f64>,
}

/// Data read from the archive, ready to replay.
#[derive(Debug)]
pub enum Loaded {
    /// A spike stream.
    Spikes(EventStream),
    /// A sensor series.
    Series(super::nwb::TimeSeries, usize),
}

/// Reads the archive (before any thread starts, so a bad file is a startup error).
///
/// # Errors
/// [`IngestError`] naming the file and dataset.
pub fn load(cfg: &ArchiveSource) -> Result<Loaded, IngestError> {
    match &cfg.content {
        ArchiveContent::Units => Ok(Loaded::Spikes(super::read_spikes(
            &cfg.path,
            Ordering::SortIfNeeded,
        )?)),
        ArchiveContent::Series {
            dataset,
            frame_samples,
        } => Ok(Loaded::Series(
            super::nwb::read_timeseries(&cfg.path, dataset)?,
            (*frame_samples).max(1),
        )),
    }
}

/// Paces a replay: data time `t0` is now, data time `t` is due `(t − t0) / speed` seconds later.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    start: Instant,
    t0: f64,
    speed: Option<f64>,
}

impl Pacer {
    /// Starts the clock at data time `t0`; `speed = None` means as fast as possible.
    #[must_use]
    pub fn start(t0: f64, speed: Option<f64>) -> Self {
        Self {
            start: Instant::now(),
            t0,
            speed,
        }
    }

    /// The data time due now (infinite when unpaced).
    #[must_use]
    pub fn due_now(&self) -> f64 {
        self.speed.map_or(f64::INFINITY, |k| {
            self.t0 + self.start.elapsed().as_secs_f64() * k
        })
    }

    /// Sleeps until data time `t_s` is due, checking `stopping` at least every 50 ms; returns
    /// `false` when `stopping` said so.
    pub fn wait(&self, t_s: f64, stopping: impl Fn() -> bool) -> bool {
        let Some(speed) = self.speed else {
            return !stopping();
        };
        let due = Duration::from_secs_f64(((t_s - self.t0) / speed).max(0.0));
        loop {
            if stopping() {
                return false;
            }
            let now = self.start.elapsed();
            if now >= due {
                return true;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        }
    }
}

/// Replays `data` onto `ring` on the current thread; always ends with [`Record::End`].
pub fn run(cfg: &ArchiveSource, data: Loaded, mut ring: RingProducer) {
    let reason = match data {
        Loaded::Spikes(stream) => {
            for (id, name) in stream.alphabet().labels().iter().enumerate() {
                ring.push(Record::Unit {
                    id: id as u32,
                    name: Arc::from(name.as_str()),
                });
            }
            let pacer = Pacer::start(stream.start(), cfg.speed);
            let mut reason = EndReason::Finished;
            for (i, (t_s, ty)) in stream.iter().enumerate() {
                if (cfg.speed.is_some() || i % 4096 == 0) && !pacer.wait(t_s, || ring.stopping()) {
                    reason = EndReason::Interrupted;
                    break;
                }
                ring.push(Record::Spike { unit: ty.0, t_s });
            }
            reason
        }
        Loaded::Series(series, frame) => {
            let n = series.samples();
            let pacer = Pacer::start(series.time_of(0), cfg.speed);
            let mut reason = EndReason::Finished;
            let mut first = 0;
            while first < n {
                let end = (first + frame).min(n);
                // A frame is published when its last sample has been taken.
                if !pacer.wait(series.time_of(end - 1), || ring.stopping()) {
                    reason = EndReason::Interrupted;
                    break;
                }
                ring.push(Record::Samples(Box::new(series.frame(first..end))));
                first = end;
            }
            reason
        }
    };
    tracing::info!(source = %cfg.name, file = %cfg.path.display(), "Archive source finished.");
    ring.push(Record::End(reason));
}
