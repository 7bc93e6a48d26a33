//! # synfire
//!
//! Mines neural spike trains for frequent serial episodes (A → B → C with inter-event delay
//! intervals), counted by non-overlapped occurrences, on the CPU and (later) on GPUs.
//!
//! Data flows one way: [`ingest`] readers produce an [`event::EventStream`]; the
//! [`episode`] miner generates candidates level by level and counts them; results are
//! rendered by [`report`].
//!
//! ```no_run
//! use synfire::episode::{Interval, MinerConfig, Threshold, mine};
//! use synfire::event::Ordering;
//! # fn main() -> anyhow::Result<()> {
//! let stream = synfire::ingest::read_spikes("fixtures/spikes/A2929-200711/A2929-200711.nwb".as_ref(),
//!     Ordering::RequireSorted)?;
//! let config = MinerConfig::new(vec![Interval::new(0.0, 0.005)?], Threshold::MinCount(100));
//! let result = mine(&stream, &config)?;
//! println!("{} frequent episodes", result.episodes.len());
//! # Ok(())
//! # }
//! ```

pub mod device;
pub mod episode;
pub mod event;
pub mod ingest;
pub mod live;
pub mod motif;
pub mod record;
pub mod report;
pub mod search;
pub mod series;
pub mod shapelet;
pub mod softdtw;
pub mod synth;
