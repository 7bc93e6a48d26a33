//! The archive source: replays an NWB file (units table, or one `TimeSeries`) onto a ring,
//! as fast as possible or paced at real time × `speed`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{OpenContext, OpenError, Source, SourceConfig};
use crate::event::{EventStream, Ordering};
use crate::ingest::IngestError;
use crate::live::buffer::{Overflow, RingProducer};
use crate::live::config::section::ConfigError;
use crate::live::window::MAX_EVENT_TIME_S;
use crate::record::{EndReason, Record, StreamKind};

/// `[sources.<name>]` with `kind = "hdf5"`: an archived NWB session.
#[derive(Clone, Debug, Deserialize)]
pub struct Hdf5SourceConfig {
    /// The file (NWB; a `label,time` CSV is accepted for spikes). Relative to the working
    /// directory.
    pub path: PathBuf,
    /// HDF5 path of a `TimeSeries` to replay as a sensor stream; absent: the units table.
    pub series: Option<String>,
    /// Samples per sensor frame (default 256).
    pub frame_samples: Option<usize>,
    /// Real time × `speed`; absent: as fast as possible.
    pub speed: Option<f64>,
    /// Overflow policy (default `block`: nothing lost).
    #[serde(default)]
    pub overflow: Overflow,
    /// Ring capacity, records (default 65,536).
    pub ring_capacity: Option<usize>,
}

impl SourceConfig for Hdf5SourceConfig {
    const KIND: &'static str = "hdf5";

    fn produces(&self) -> StreamKind {
        if self.series.is_some() {
            StreamKind::Sensor
        } else {
            StreamKind::Spikes
        }
    }

    fn ring(&self) -> (usize, Overflow) {
        (self.ring_capacity.unwrap_or(1 << 16), self.overflow)
    }

    fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if !self.path.exists() {
            errors.push(ConfigError::new(
                "path",
                format!("{} does not exist", self.path.display()),
            ));
        }
        if let Some(speed) = self.speed
            && !(speed.is_finite() && speed > 0.0)
        {
            errors.push(ConfigError::new(
                "speed",
                format!("must be a positive factor of real time, got {speed}"),
            ));
        }
        if self.frame_samples == Some(0) {
            errors.push(ConfigError::new("frame_samples", "must be at least 1"));
        }
        if self.series.is_none() && self.frame_samples.is_some() {
            errors.push(ConfigError::new(
                "frame_samples",
                "applies to `series` sources only",
            ));
        }
        if self.ring_capacity == Some(0) {
            errors.push(ConfigError::new("ring_capacity", "must be at least 1"));
        }
        errors
    }

    /// Reads the whole archive now, so that a bad file is a startup error.
    fn open(&self, name: &str, _ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError> {
        let cfg = ArchiveSource {
            name: name.to_owned(),
            path: self.path.clone(),
            content: match &self.series {
                None => ArchiveContent::Units,
                Some(d) => ArchiveContent::Series {
                    dataset: d.clone(),
                    frame_samples: self.frame_samples.unwrap_or(256),
                },
            },
            speed: self.speed,
        };
        let data = load(&cfg).map_err(|e| OpenError(format!("source `{name}`: {e}")))?;
        Ok(Box::new(OpenArchive { cfg, data }))
    }
}

/// An archive read into memory, ready to replay.
struct OpenArchive {
    cfg: ArchiveSource,
    data: Loaded,
}

impl Source for OpenArchive {
    fn run(self: Box<Self>, ring: RingProducer) {
        run(&self.cfg, self.data, ring);
    }
}

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
    Series(crate::ingest::nwb::TimeSeries, usize),
}

/// Reads the archive (before any thread starts, so a bad file is a startup error).
///
/// # Errors
/// [`IngestError`] naming the file and dataset.
pub fn load(cfg: &ArchiveSource) -> Result<Loaded, IngestError> {
    match &cfg.content {
        ArchiveContent::Units => Ok(Loaded::Spikes(crate::ingest::read_spikes(
            &cfg.path,
            Ordering::SortIfNeeded,
        )?)),
        ArchiveContent::Series {
            dataset,
            frame_samples,
        } => Ok(Loaded::Series(
            crate::ingest::nwb::read_timeseries(&cfg.path, dataset)?,
            (*frame_samples).max(1),
        )),
    }
}

/// Paces a replay: data time `t0` is now, data time `t` is due `(t − t0) / speed` seconds later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pacer {
    start: Instant,
    t0: f64,
    speed: Option<f64>,
}

impl Pacer {
    /// Starts the clock at data time `t0`; `speed = None` means as fast as possible.
    #[must_use]
    pub(crate) fn start(t0: f64, speed: Option<f64>) -> Self {
        Self {
            start: Instant::now(),
            t0,
            speed,
        }
    }

    /// The data time due now (infinite when unpaced).
    #[must_use]
    pub(crate) fn due_now(&self) -> f64 {
        self.speed.map_or(f64::INFINITY, |k| {
            self.t0 + self.start.elapsed().as_secs_f64() * k
        })
    }

    /// Sleeps until data time `t_s` is due, checking `stopping` at least every 50 ms; returns
    /// `false` when `stopping` said so.
    pub(crate) fn wait(&self, t_s: f64, stopping: impl Fn() -> bool) -> bool {
        let Some(speed) = self.speed else {
            return !stopping();
        };
        // An out-of-range time (an absurd timestamp, refused downstream) is not waited for.
        let due = Duration::try_from_secs_f64(((t_s - self.t0) / speed).max(0.0));
        let Some(due) = due.ok().filter(|_| t_s < MAX_EVENT_TIME_S) else {
            return !stopping();
        };
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
