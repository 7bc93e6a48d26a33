//! Pipeline files (TOML): sources → windows → stages → sinks, validated before anything
//! starts.
//!
//! Validation runs in two phases and collects **every** error before reporting
//! ([`ConfigErrors`]): phase 1 parses each section on its own (unknown fields, wrong types,
//! missing fields), phase 2 checks values and references (units in option names: `_s`
//! seconds, `_samples`, `_bytes`, `_messages`). Each error names the file and the dotted
//! field, e.g. ``pipelines/x.toml: `windows.w60.hop_s`: must be positive, got 0``.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::buffer::Overflow;
use crate::device::DeviceChoice;
use crate::episode::hybrid::{Calibration, ExactAlgorithm};
use crate::episode::{GpuSettings, Interval, MinerConfig, Strategy, SupportPer, Threshold};
use crate::ingest::openephys::UnitKey;
use crate::ingest::zmq::WireFormat;
use crate::stage::StreamKind;

/// One configuration error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted field, e.g. `sources.mea.ring_capacity` (empty for file-level errors).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Every error of a pipeline file.
#[derive(Debug, thiserror::Error)]
pub struct ConfigErrors {
    /// The file.
    pub file: PathBuf,
    /// The errors, in file order by section.
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{}: {n} error{}",
            self.file.display(),
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            if e.field.is_empty() {
                write!(f, "\n  {}: {}", self.file.display(), e.message)?;
            } else {
                write!(
                    f,
                    "\n  {}: `{}`: {}",
                    self.file.display(),
                    e.field,
                    e.message
                )?;
            }
        }
        Ok(())
    }
}

/// `[pipeline]`: settings of the whole pipeline.
#[derive(Clone, Debug, Deserialize, Default)]
pub struct PipelineSection {
    /// Prometheus endpoint address, e.g. `127.0.0.1:9100` (overridden by `--metrics`).
    pub metrics: Option<String>,
    /// Windows queued between a window thread and each stage (default 4).
    pub stage_queue_windows: Option<usize>,
}

/// Connect or bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketMode {
    /// `connect` to a peer that binds.
    Connect,
    /// `bind` and let peers connect.
    Bind,
}

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

/// `[sources.<name>]` with `kind = "zmq"`: a ZeroMQ SUB socket.
#[derive(Clone, Debug, Deserialize)]
pub struct ZmqSourceConfig {
    /// Endpoint, e.g. `tcp://127.0.0.1:5557`.
    pub endpoint: String,
    /// `connect` (default) or `bind`.
    pub mode: Option<SocketMode>,
    /// `openephys` (default) or `synfire`.
    #[serde(default)]
    pub format: WireFormat,
    /// `spikes` (default) or `sensor` (synfire format only).
    pub content: Option<ContentKind>,
    /// Unit naming of Open Ephys messages (default `full`).
    #[serde(default)]
    pub unit_key: UnitKey,
    /// Larger messages are rejected (default 16 MiB).
    pub max_message_bytes: Option<usize>,
    /// ZeroMQ receive high-water mark (default 100,000; 0 = unlimited).
    pub receive_hwm_messages: Option<i32>,
    /// Open Ephys: a time this far before the newest is a restart (default 10 s).
    pub restart_gap_s: Option<f64>,
    /// End at the publisher's end-of-stream message (default true; synfire format).
    pub stop_on_end: Option<bool>,
    /// Overflow policy (default `drop_newest`: never stall the socket).
    pub overflow: Option<Overflow>,
    /// Ring capacity, records (default 1,048,576).
    pub ring_capacity: Option<usize>,
}

/// `content` of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentKind {
    /// Spike events.
    Spikes,
    /// Sensor samples.
    Sensor,
}

/// A source.
#[derive(Clone, Debug)]
pub enum SourceConfig {
    /// An archived session.
    Hdf5(Hdf5SourceConfig),
    /// A live socket.
    Zmq(ZmqSourceConfig),
}

impl SourceConfig {
    /// What the source produces.
    #[must_use]
    pub fn kind(&self) -> StreamKind {
        match self {
            Self::Hdf5(h) if h.series.is_some() => StreamKind::Sensor,
            Self::Zmq(z) if z.content == Some(ContentKind::Sensor) => StreamKind::Sensor,
            _ => StreamKind::Spikes,
        }
    }
}

/// `[windows.<name>]`.
#[derive(Clone, Debug, Deserialize)]
pub struct WindowConfig {
    /// The source it reads.
    pub source: String,
    /// Spike windows: length, seconds.
    pub length_s: Option<f64>,
    /// Spike windows: hop, seconds.
    pub hop_s: Option<f64>,
    /// Spike windows: how long after its end a window waits for late events (default 0 s).
    pub allowed_lateness_s: Option<f64>,
    /// Sensor windows: length, samples.
    pub length_samples: Option<u64>,
    /// Sensor windows: hop, samples.
    pub hop_samples: Option<u64>,
}

/// `[stages.<name>]` with `kind = "episodes"`: the options of `synfire mine`.
#[derive(Clone, Debug, Deserialize)]
pub struct EpisodesConfig {
    /// The window it reads.
    pub window: String,
    /// Inter-event intervals `(low, high]`, seconds: `[[0.0, 0.005], [0.005, 0.01]]`.
    pub intervals_s: Vec<[f64; 2]>,
    /// Minimum count.
    pub min_count: Option<u64>,
    /// Support threshold (see `support_per`).
    pub support: Option<f64>,
    /// `events` (default) or `seconds`.
    #[serde(default)]
    pub support_per: SupportPer,
    /// Largest episode size (default 10).
    pub max_level: Option<usize>,
    /// Count every candidate exactly (default false: PreElim first).
    #[serde(default)]
    pub one_pass: bool,
    /// `auto` (default), `cpu` or `gpu`.
    #[serde(default)]
    pub device: DeviceChoice,
    /// GPU ordinals (default: all).
    pub gpus: Option<Vec<usize>>,
    /// `hybrid` (default), `ptpe` or `mtpe`.
    #[serde(default)]
    pub exact_kernel: ExactAlgorithm,
    /// Calibration file for the hybrid choice.
    pub calibration: Option<PathBuf>,
}

impl EpisodesConfig {
    /// The miner configuration.
    ///
    /// # Errors
    /// Messages naming the field.
    pub fn miner(&self) -> Result<MinerConfig, Vec<(String, String)>> {
        let mut errors = Vec::new();
        let mut intervals = Vec::new();
        for (i, [lo, hi]) in self.intervals_s.iter().enumerate() {
            match Interval::new(*lo, *hi) {
                Ok(iv) if intervals.contains(&iv) => {
                    errors.push((format!("intervals_s[{i}]"), "occurs twice".to_owned()));
                }
                Ok(iv) => intervals.push(iv),
                Err(e) => errors.push((format!("intervals_s[{i}]"), e.to_string())),
            }
        }
        if self.intervals_s.is_empty() {
            errors.push((
                "intervals_s".into(),
                "needs at least one [low, high] pair".into(),
            ));
        }
        if self.min_count.is_some() && self.support.is_some() {
            errors.push((
                "support".into(),
                "give `min_count` or `support`, not both".into(),
            ));
        }
        let threshold = Threshold::from_options(self.min_count, self.support, self.support_per);
        let mut config = MinerConfig::new(intervals, threshold);
        config.max_level = self.max_level.unwrap_or(10);
        config.strategy = if self.one_pass {
            Strategy::OnePass
        } else {
            Strategy::TwoPass
        };
        if let Err(e) = threshold.validate() {
            let field = if self.min_count.is_some() {
                "min_count"
            } else {
                "support"
            };
            errors.push((field.into(), e.to_string()));
        }
        if config.max_level == 0 || config.max_level > crate::episode::count::MAX_EPISODE_LEN {
            errors.push((
                "max_level".into(),
                format!(
                    "must be between 1 and {}, got {}",
                    crate::episode::count::MAX_EPISODE_LEN,
                    config.max_level
                ),
            ));
        }
        if let Some(path) = &self.calibration {
            if let Err(e) = Calibration::load(path) {
                errors.push(("calibration".into(), e.to_string()));
            }
        }
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(errors)
        }
    }

    /// The GPU settings.
    #[must_use]
    pub fn gpu_settings(&self) -> GpuSettings {
        GpuSettings {
            gpus: self.gpus.clone(),
            exact: self.exact_kernel,
            calibration: self.calibration.clone(),
        }
    }
}

/// `[stages.<name>]` with `kind = "summary"`: per-channel statistics of sensor windows.
#[derive(Clone, Debug, Deserialize)]
pub struct SummaryConfig {
    /// The window it reads.
    pub window: String,
}

/// `[stages.<name>]` with `kind = "motif"`: exact top-k motifs of one channel of each sensor
/// window (`synfire motif`'s options).
#[derive(Clone, Debug, Deserialize)]
pub struct MotifStageConfig {
    /// The window it reads.
    pub window: String,
    /// Subsequence length, samples (≥ 2).
    pub m: usize,
    /// Exclusion zone = ceil(m / exclusion_denom) (default 4).
    #[serde(default = "default_exclusion_denom")]
    pub exclusion_denom: usize,
    /// Non-overlapping motifs per window (default 1).
    #[serde(default = "one")]
    pub top_k: usize,
    /// The channel searched (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Exact path (default `auto`).
    #[serde(default)]
    pub method: crate::motif::MethodChoice,
    /// Where to search (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
}

fn default_exclusion_denom() -> usize {
    4
}

fn one() -> usize {
    1
}

impl MotifStageConfig {
    /// The search configuration.
    #[must_use]
    pub fn motif(&self) -> crate::motif::MotifConfig {
        crate::motif::MotifConfig {
            exclusion: crate::motif::default_exclusion(self.m, self.exclusion_denom),
            top_k: self.top_k,
            method: self.method,
            ..crate::motif::MotifConfig::new(self.m)
        }
    }
}

/// `[stages.<name>]` with `kind = "search"`: exact k nearest earlier occurrences of each
/// sensor window (or of its last `m` samples) in a SING index of the channel's past.
#[derive(Clone, Debug, Deserialize)]
pub struct SearchStageConfig {
    /// The window it reads.
    pub window: String,
    /// The channel searched (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Subsequence length, samples: index every length-`m` subsequence and query each
    /// window's last `m` samples. Absent: whole windows are the series.
    pub m: Option<usize>,
    /// Neighbours per window (default 1).
    #[serde(default = "one")]
    pub k: usize,
    /// Where lower bounds are computed (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
    /// Series per index leaf (default 1024).
    #[serde(default = "default_leaf_capacity")]
    pub leaf_capacity: usize,
    /// Most windows or subsequences kept, newest first (default 1,000,000).
    #[serde(default = "default_search_capacity")]
    pub capacity: usize,
}

fn default_leaf_capacity() -> usize {
    crate::search::BuildOptions::default().leaf_capacity
}

fn default_search_capacity() -> usize {
    1_000_000
}

impl SearchStageConfig {
    /// The stage options.
    #[must_use]
    pub fn options(&self) -> crate::stage::search::SearchStageOptions {
        crate::stage::search::SearchStageOptions {
            channel: self.channel,
            m: self.m,
            k: self.k,
            device: self.device,
            leaf_capacity: self.leaf_capacity,
            capacity: self.capacity,
        }
    }
}

/// `[stages.<name>]` with `kind = "softdtw"`: soft-DTW of one channel of each sensor window
/// against a set of templates (`synfire softdtw`'s options), with the nearest template.
#[derive(Clone, Debug, Deserialize)]
pub struct SoftDtwStageConfig {
    /// The window it reads.
    pub window: String,
    /// The templates: a UCR `.ts`/`.tsv`/`.txt` file or `.npy` `[B, L]` (labels, when the
    /// file has them, name the nearest template).
    pub templates: PathBuf,
    /// Smoothing γ > 0.
    pub gamma: f64,
    /// Sakoe-Chiba half-width (default: none).
    #[serde(default)]
    pub band: Option<usize>,
    /// The channel compared (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Z-normalise the window and every template first (default true), so shapes compare
    /// whatever the units.
    #[serde(default = "yes")]
    pub znormalize: bool,
    /// Report the soft-DTW divergence instead of the value (default false).
    #[serde(default)]
    pub divergence: bool,
    /// Where to compute (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
}

fn yes() -> bool {
    true
}

/// `[stages.<name>]` with `kind = "shapelet"`: classifies one channel of each sensor window
/// with a shapelet tree, read from `model` (a file of `synfire shapelet --save-model`) or
/// trained when the pipeline starts from the labelled series in `train` (`synfire shapelet`'s
/// options).
#[derive(Clone, Debug, Deserialize)]
pub struct ShapeletStageConfig {
    /// The window it reads.
    pub window: String,
    /// A trained model (JSON).
    pub model: Option<PathBuf>,
    /// Labelled training series (UCR `.ts`, `.tsv`, `.txt`) to train on at startup.
    pub train: Option<PathBuf>,
    /// With `train`: shortest candidate length, samples.
    pub min_length: Option<usize>,
    /// With `train`: longest candidate length, samples.
    pub max_length: Option<usize>,
    /// With `train`: length step (default 1).
    pub step: Option<usize>,
    /// With `train`: shapelets per rule (1 = plain, default; more: logical AND/OR rules).
    pub max_terms: Option<usize>,
    /// With `train`: depth limit of the tree.
    pub max_depth: Option<usize>,
    /// The channel classified (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Where to train (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
}

impl ShapeletStageConfig {
    /// The training options (with `train`).
    #[must_use]
    pub fn shapelet(&self) -> crate::shapelet::ShapeletConfig {
        crate::shapelet::ShapeletConfig {
            min_length: self.min_length.unwrap_or(0),
            max_length: self.max_length.unwrap_or(0),
            step: self.step.unwrap_or(1),
            max_terms: self.max_terms.unwrap_or(1),
            max_depth: self.max_depth,
        }
    }

    /// The tree: the model file read, or a tree trained on `train` (on `device`).
    ///
    /// # Errors
    /// Unreadable or invalid files and training errors, naming the file; neither `model` nor
    /// `train` given.
    pub fn tree(&self) -> Result<crate::shapelet::ShapeletTree, crate::shapelet::ShapeletError> {
        use crate::shapelet::{ShapeletError, ShapeletTree, TrainingSet, train};
        match (&self.model, &self.train) {
            (Some(path), _) => ShapeletTree::load(path),
            (None, Some(path)) => {
                let input = path.display().to_string();
                let d = crate::series::read_dataset(path).map_err(|e| ShapeletError::Model {
                    path: input.clone(),
                    message: e.to_string(),
                })?;
                let set = TrainingSet::from_dataset(&d, &input)?;
                Ok(train(&set, &self.shapelet(), self.device)?.0)
            }
            (None, None) => Err(ShapeletError::Config {
                option: "model",
                message: "give `model` or `train`".into(),
            }),
        }
    }

    /// Checks the options (reading the model or the training file); `(field, message)` pairs
    /// and, when known, the samples a window needs.
    fn check(&self) -> (Vec<(&'static str, String)>, Option<usize>) {
        use crate::shapelet::{ShapeletError, ShapeletTree, TrainingSet};
        let mut errors = Vec::new();
        let mut needed = None;
        match (&self.model, &self.train) {
            (Some(_), Some(_)) => errors.push(("train", "give `model` or `train`, not both".into())),
            (None, None) => errors.push((
                "model",
                "missing: give `model` (a file written by `synfire shapelet --save-model`) or                  `train` with `min_length` and `max_length`"
                    .into(),
            )),
            (Some(path), None) => {
                for (field, given) in [
                    ("min_length", self.min_length.is_some()),
                    ("max_length", self.max_length.is_some()),
                    ("step", self.step.is_some()),
                    ("max_terms", self.max_terms.is_some()),
                    ("max_depth", self.max_depth.is_some()),
                ] {
                    if given {
                        errors.push((field, "only with `train` (a model is already trained)".into()));
                    }
                }
                match ShapeletTree::load(path) {
                    Ok(t) => needed = Some(t.max_shapelet_length()),
                    Err(e) => errors.push(("model", e.to_string())),
                }
            }
            (None, Some(path)) => {
                for (field, v) in [("min_length", self.min_length), ("max_length", self.max_length)] {
                    if v.is_none() {
                        errors.push((field, "missing (needed with `train`)".into()));
                    }
                }
                let input = path.display().to_string();
                let set = crate::series::read_dataset(path)
                    .map_err(|e| e.to_string())
                    .and_then(|d| TrainingSet::from_dataset(&d, &input).map_err(|e| e.to_string()));
                match set {
                    Err(e) => errors.push(("train", e)),
                    Ok(set) if errors.is_empty() => match self.shapelet().validate(set.length) {
                        Ok(()) => needed = self.max_length,
                        Err(ShapeletError::Config { option, message }) => {
                            errors.push((option, message));
                        }
                        Err(e) => errors.push(("train", e.to_string())),
                    },
                    Ok(_) => {}
                }
            }
        }
        (errors, needed)
    }
}

/// A stage.
#[derive(Clone, Debug)]
pub enum StageConfig {
    /// Soft-DTW against templates.
    SoftDtw(SoftDtwStageConfig),
    /// Exact similarity search over each channel's past.
    Search(SearchStageConfig),
    /// Exact motifs of sensor windows.
    Motif(MotifStageConfig),
    /// Shapelet-tree classification of sensor windows.
    Shapelet(ShapeletStageConfig),
    /// Frequent-episode mining.
    Episodes(EpisodesConfig),
    /// Sensor summary.
    Summary(SummaryConfig),
}

impl StageConfig {
    /// The window the stage reads.
    #[must_use]
    pub fn window(&self) -> &str {
        match self {
            Self::Episodes(e) => &e.window,
            Self::Summary(s) => &s.window,
            Self::Motif(s) => &s.window,
            Self::Search(s) => &s.window,
            Self::SoftDtw(s) => &s.window,
            Self::Shapelet(s) => &s.window,
        }
    }

    /// What the stage reads.
    #[must_use]
    pub fn input(&self) -> StreamKind {
        match self {
            Self::Episodes(_) => StreamKind::Spikes,
            Self::Summary(_)
            | Self::Motif(_)
            | Self::Search(_)
            | Self::SoftDtw(_)
            | Self::Shapelet(_) => StreamKind::Sensor,
        }
    }
}

/// `[sinks.<name>]` with `kind = "jsonl"`.
#[derive(Clone, Debug, Deserialize)]
pub struct JsonlConfig {
    /// File to append to, or `-` for standard output (default).
    pub path: Option<PathBuf>,
    /// Stages whose results it writes (default: all).
    pub stages: Option<Vec<String>>,
}

/// `[sinks.<name>]` with `kind = "zmq_pub"`.
#[derive(Clone, Debug, Deserialize)]
pub struct ZmqPubConfig {
    /// Endpoint, e.g. `tcp://127.0.0.1:5560`.
    pub endpoint: String,
    /// `bind` (default) or `connect`.
    pub mode: Option<SocketMode>,
    /// Stages whose results it publishes (default: all).
    pub stages: Option<Vec<String>>,
}

/// A sink.
#[derive(Clone, Debug)]
pub enum SinkConfig {
    /// JSON lines.
    Jsonl(JsonlConfig),
    /// ZeroMQ PUB, topic = stage name.
    ZmqPub(ZmqPubConfig),
}

impl SinkConfig {
    /// The stages it takes (None: all).
    #[must_use]
    pub fn stages(&self) -> Option<&[String]> {
        match self {
            Self::Jsonl(j) => j.stages.as_deref(),
            Self::ZmqPub(z) => z.stages.as_deref(),
        }
    }
}

/// A validated pipeline.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// `[pipeline]`.
    pub pipeline: PipelineSection,
    /// Sources by name.
    pub sources: BTreeMap<String, SourceConfig>,
    /// Windows by name.
    pub windows: BTreeMap<String, WindowConfig>,
    /// Stages by name, with their miner configuration where they mine.
    pub stages: BTreeMap<String, StageConfig>,
    /// Sinks by name.
    pub sinks: BTreeMap<String, SinkConfig>,
}

const SECTIONS: &[&str] = &["pipeline", "sources", "windows", "stages", "sinks"];

/// Deserialises `value` as `T`, collecting every unknown field and the first type error.
fn typed<T: DeserializeOwned>(
    value: toml::Value,
    prefix: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<T> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    let result = serde_ignored::deserialize(de, |path| unknown.push(path.to_string()));
    for u in unknown {
        errors.push(ConfigError {
            field: format!("{prefix}.{u}"),
            message: "unknown field".into(),
        });
    }
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            let path = track.path().to_string();
            let field = if path.is_empty() || path == "." {
                prefix.to_owned()
            } else {
                format!("{prefix}.{path}")
            };
            errors.push(ConfigError {
                field,
                message: e.to_string(),
            });
            None
        }
    }
}

fn take_kind(
    table: &mut toml::Table,
    prefix: &str,
    kinds: &[&str],
    errors: &mut Vec<ConfigError>,
) -> Option<String> {
    match table.remove("kind") {
        Some(toml::Value::String(k)) if kinds.contains(&k.as_str()) => Some(k),
        Some(other) => {
            errors.push(ConfigError {
                field: format!("{prefix}.kind"),
                message: format!("unknown kind {other}; expected one of {kinds:?}"),
            });
            None
        }
        None => {
            errors.push(ConfigError {
                field: format!("{prefix}.kind"),
                message: format!("missing; expected one of {kinds:?}"),
            });
            None
        }
    }
}

fn sections(
    root: &mut toml::Table,
    name: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<(String, toml::Table)> {
    match root.remove(name) {
        None => Vec::new(),
        Some(toml::Value::Table(t)) => t
            .into_iter()
            .filter_map(|(k, v)| match v {
                toml::Value::Table(t) => Some((k, t)),
                _ => {
                    errors.push(ConfigError {
                        field: format!("{name}.{k}"),
                        message: format!("must be a table (`[{name}.{k}]`)"),
                    });
                    None
                }
            })
            .collect(),
        Some(_) => {
            errors.push(ConfigError {
                field: name.into(),
                message: format!("must be a table of named entries (`[{name}.<name>]`)"),
            });
            Vec::new()
        }
    }
}

impl PipelineConfig {
    /// Reads and validates a pipeline file.
    ///
    /// # Errors
    /// [`ConfigErrors`] with every error found.
    pub fn load(file: &Path) -> Result<Self, ConfigErrors> {
        let fail = |message: String| ConfigErrors {
            file: file.into(),
            errors: vec![ConfigError {
                field: String::new(),
                message,
            }],
        };
        let text = std::fs::read_to_string(file).map_err(|e| fail(format!("cannot read: {e}")))?;
        Self::parse(&text, file)
    }

    /// Validates pipeline text; `file` names it in errors and anchors nothing else.
    ///
    /// # Errors
    /// [`ConfigErrors`] with every error found.
    pub fn parse(text: &str, file: &Path) -> Result<Self, ConfigErrors> {
        let mut errors = Vec::new();
        let mut root: toml::Table = toml::from_str(text).map_err(|e| ConfigErrors {
            file: file.into(),
            errors: vec![ConfigError {
                field: String::new(),
                message: format!("not valid TOML: {}", e.to_string().trim_end()),
            }],
        })?;
        for key in root.keys() {
            if !SECTIONS.contains(&key.as_str()) {
                errors.push(ConfigError {
                    field: key.clone(),
                    message: format!("unknown section; expected one of {SECTIONS:?}"),
                });
            }
        }
        let pipeline = match root.remove("pipeline") {
            Some(v) => typed(v, "pipeline", &mut errors).unwrap_or_default(),
            None => PipelineSection::default(),
        };
        let mut sources = BTreeMap::new();
        for (name, mut t) in sections(&mut root, "sources", &mut errors) {
            let p = format!("sources.{name}");
            let Some(kind) = take_kind(&mut t, &p, &["hdf5", "zmq"], &mut errors) else {
                continue;
            };
            let v = toml::Value::Table(t);
            let s = match kind.as_str() {
                "hdf5" => typed(v, &p, &mut errors).map(SourceConfig::Hdf5),
                _ => typed(v, &p, &mut errors).map(SourceConfig::Zmq),
            };
            if let Some(s) = s {
                sources.insert(name, s);
            }
        }
        let mut windows = BTreeMap::new();
        for (name, t) in sections(&mut root, "windows", &mut errors) {
            let p = format!("windows.{name}");
            if let Some(w) = typed(toml::Value::Table(t), &p, &mut errors) {
                windows.insert(name, w);
            }
        }
        let mut stages = BTreeMap::new();
        for (name, mut t) in sections(&mut root, "stages", &mut errors) {
            let p = format!("stages.{name}");
            let Some(kind) = take_kind(
                &mut t,
                &p,
                &[
                    "episodes", "summary", "motif", "search", "softdtw", "shapelet",
                ],
                &mut errors,
            ) else {
                continue;
            };
            let v = toml::Value::Table(t);
            let s = match kind.as_str() {
                "episodes" => typed(v, &p, &mut errors).map(StageConfig::Episodes),
                "motif" => typed(v, &p, &mut errors).map(StageConfig::Motif),
                "search" => typed(v, &p, &mut errors).map(StageConfig::Search),
                "softdtw" => typed(v, &p, &mut errors).map(StageConfig::SoftDtw),
                "shapelet" => typed(v, &p, &mut errors).map(StageConfig::Shapelet),
                _ => typed(v, &p, &mut errors).map(StageConfig::Summary),
            };
            if let Some(s) = s {
                stages.insert(name, s);
            }
        }
        let mut sinks = BTreeMap::new();
        for (name, mut t) in sections(&mut root, "sinks", &mut errors) {
            let p = format!("sinks.{name}");
            let Some(kind) = take_kind(&mut t, &p, &["jsonl", "zmq_pub"], &mut errors) else {
                continue;
            };
            let v = toml::Value::Table(t);
            let s = match kind.as_str() {
                "jsonl" => typed(v, &p, &mut errors).map(SinkConfig::Jsonl),
                _ => typed(v, &p, &mut errors).map(SinkConfig::ZmqPub),
            };
            if let Some(s) = s {
                sinks.insert(name, s);
            }
        }
        let config = Self {
            file: file.into(),
            pipeline,
            sources,
            windows,
            stages,
            sinks,
        };
        config.check(&mut errors);
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors {
                file: file.into(),
                errors,
            })
        }
    }

    /// Phase 2: values and references.
    fn check(&self, errors: &mut Vec<ConfigError>) {
        let mut err = |field: String, message: String| errors.push(ConfigError { field, message });
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if let Some(m) = &self.pipeline.metrics {
            if m.parse::<std::net::SocketAddr>().is_err() {
                err(
                    "pipeline.metrics".into(),
                    format!("`{m}` is not an address like `127.0.0.1:9100`"),
                );
            }
        }
        if self.pipeline.stage_queue_windows == Some(0) {
            err(
                "pipeline.stage_queue_windows".into(),
                "must be at least 1".into(),
            );
        }
        for (name, s) in &self.sources {
            let p = format!("sources.{name}");
            let ring = match s {
                SourceConfig::Hdf5(h) => {
                    if !h.path.exists() {
                        err(
                            format!("{p}.path"),
                            format!("{} does not exist", h.path.display()),
                        );
                    }
                    if let Some(speed) = h.speed {
                        if !positive(speed) {
                            err(
                                format!("{p}.speed"),
                                format!("must be a positive factor of real time, got {speed}"),
                            );
                        }
                    }
                    if h.frame_samples == Some(0) {
                        err(format!("{p}.frame_samples"), "must be at least 1".into());
                    }
                    if h.series.is_none() && h.frame_samples.is_some() {
                        err(
                            format!("{p}.frame_samples"),
                            "applies to `series` sources only".into(),
                        );
                    }
                    h.ring_capacity
                }
                SourceConfig::Zmq(z) => {
                    if !z.endpoint.contains("://") {
                        err(
                            format!("{p}.endpoint"),
                            format!(
                                "`{}` is not a ZeroMQ endpoint like `tcp://127.0.0.1:5557`",
                                z.endpoint
                            ),
                        );
                    }
                    if z.format == WireFormat::Openephys && z.content == Some(ContentKind::Sensor) {
                        err(format!("{p}.content"), "Open Ephys Event Broadcaster messages carry spikes only; use `format = \"synfire\"` for sensor frames".into());
                    }
                    if z.max_message_bytes.is_some_and(|b| b < 64) {
                        err(
                            format!("{p}.max_message_bytes"),
                            "must be at least 64".into(),
                        );
                    }
                    if z.receive_hwm_messages.is_some_and(|h| h < 0) {
                        err(
                            format!("{p}.receive_hwm_messages"),
                            "must be ≥ 0 (0: unlimited)".into(),
                        );
                    }
                    if let Some(g) = z.restart_gap_s {
                        if !(g.is_finite() && g >= 0.0) {
                            err(
                                format!("{p}.restart_gap_s"),
                                format!("must be ≥ 0 seconds, got {g}"),
                            );
                        }
                    }
                    z.ring_capacity
                }
            };
            if ring == Some(0) {
                err(format!("{p}.ring_capacity"), "must be at least 1".into());
            }
            if !self.windows.values().any(|w| &w.source == name) {
                tracing::warn!(source = %name, "Source feeds no window.");
            }
        }
        for (name, w) in &self.windows {
            let p = format!("windows.{name}");
            let Some(source) = self.sources.get(&w.source) else {
                err(
                    format!("{p}.source"),
                    format!("no source named `{}`", w.source),
                );
                continue;
            };
            match source.kind() {
                StreamKind::Spikes => {
                    for (f, v) in [("length_s", w.length_s), ("hop_s", w.hop_s)] {
                        match v {
                            None => err(
                                format!("{p}.{f}"),
                                "missing (spike windows are time-based)".into(),
                            ),
                            Some(x) if !positive(x) => err(
                                format!("{p}.{f}"),
                                format!("must be positive seconds, got {x}"),
                            ),
                            _ => {}
                        }
                    }
                    if let Some(l) = w.allowed_lateness_s {
                        if !(l.is_finite() && l >= 0.0) {
                            err(
                                format!("{p}.allowed_lateness_s"),
                                format!("must be ≥ 0 seconds, got {l}"),
                            );
                        }
                    }
                    for (f, v) in [
                        ("length_samples", w.length_samples),
                        ("hop_samples", w.hop_samples),
                    ] {
                        if v.is_some() {
                            err(
                                format!("{p}.{f}"),
                                format!(
                                    "source `{}` carries spikes: use `length_s`/`hop_s`",
                                    w.source
                                ),
                            );
                        }
                    }
                }
                StreamKind::Sensor => {
                    for (f, v) in [
                        ("length_samples", w.length_samples),
                        ("hop_samples", w.hop_samples),
                    ] {
                        match v {
                            None => err(
                                format!("{p}.{f}"),
                                "missing (sensor windows are sample-based)".into(),
                            ),
                            Some(0) => err(format!("{p}.{f}"), "must be at least 1".into()),
                            _ => {}
                        }
                    }
                    for (f, v) in [
                        ("length_s", w.length_s),
                        ("hop_s", w.hop_s),
                        ("allowed_lateness_s", w.allowed_lateness_s),
                    ] {
                        if v.is_some() {
                            err(
                                format!("{p}.{f}"),
                                format!(
                                    "source `{}` carries sensor samples: use `length_samples`/`hop_samples`",
                                    w.source
                                ),
                            );
                        }
                    }
                }
            }
        }
        for (name, s) in &self.stages {
            let p = format!("stages.{name}");
            match self.windows.get(s.window()) {
                None => err(
                    format!("{p}.window"),
                    format!("no window named `{}`", s.window()),
                ),
                Some(w) => {
                    if let Some(src) = self.sources.get(&w.source) {
                        if src.kind() != s.input() {
                            err(
                                format!("{p}.window"),
                                format!(
                                    "window `{}` carries {} but this stage reads {}",
                                    s.window(),
                                    src.kind(),
                                    s.input()
                                ),
                            );
                        }
                    }
                }
            }
            if let StageConfig::Motif(mc) = s {
                if mc.m < 2 {
                    err(
                        format!("{p}.m"),
                        format!("must be at least 2, got {}", mc.m),
                    );
                }
                if mc.exclusion_denom == 0 {
                    err(format!("{p}.exclusion_denom"), "must be at least 1".into());
                }
                if mc.top_k == 0 {
                    err(format!("{p}.top_k"), "must be at least 1".into());
                }
                if let Some(len) = self.windows.get(s.window()).and_then(|w| w.length_samples) {
                    let needed = mc.motif().m + mc.motif().exclusion + 1;
                    if len < needed as u64 {
                        err(
                            format!("{p}.m"),
                            format!(
                                "m = {} needs windows of at least {needed} samples; window `{}` has {len}",
                                mc.m,
                                s.window()
                            ),
                        );
                    }
                }
            }
            if let StageConfig::SoftDtw(sc) = s {
                if !(sc.gamma.is_finite() && sc.gamma > 0.0) {
                    err(
                        format!("{p}.gamma"),
                        format!("must be a finite number above 0, got {}", sc.gamma),
                    );
                }
                if !sc.templates.exists() {
                    err(
                        format!("{p}.templates"),
                        format!("{} does not exist", sc.templates.display()),
                    );
                }
            }
            if let StageConfig::Search(sc) = s {
                for (f, v) in [
                    ("k", sc.k),
                    ("leaf_capacity", sc.leaf_capacity),
                    ("capacity", sc.capacity),
                ] {
                    if v == 0 {
                        err(format!("{p}.{f}"), "must be at least 1".into());
                    }
                }
                if sc.m == Some(0) {
                    err(format!("{p}.m"), "must be at least 1".into());
                }
                if let (Some(m), Some(len)) = (
                    sc.m,
                    self.windows.get(s.window()).and_then(|w| w.length_samples),
                ) {
                    if m as u64 > len {
                        err(
                            format!("{p}.m"),
                            format!(
                                "m = {m} is longer than window `{}` ({len} samples)",
                                s.window()
                            ),
                        );
                    }
                }
            }
            if let StageConfig::Shapelet(sc) = s {
                let (list, needed) = sc.check();
                for (f, m) in list {
                    err(format!("{p}.{f}"), m);
                }
                let len = self.windows.get(s.window()).and_then(|w| w.length_samples);
                if let (Some(len), Some(needed)) = (len, needed) {
                    if len < needed as u64 {
                        err(
                            format!("{p}.window"),
                            format!(
                                "the shapelets need windows of at least {needed} samples; window `{}` has {len}",
                                s.window()
                            ),
                        );
                    }
                }
            }
            if let StageConfig::Episodes(e) = s {
                if let Err(list) = e.miner() {
                    for (f, m) in list {
                        err(format!("{p}.{f}"), m);
                    }
                }
            }
        }
        if self.stages.is_empty() {
            err("stages".into(), "the pipeline has no stage".into());
        }
        if self.sinks.is_empty() {
            err("sinks".into(), "the pipeline has no sink".into());
        }
        for (name, s) in &self.sinks {
            let p = format!("sinks.{name}");
            for st in s.stages().unwrap_or_default() {
                if !self.stages.contains_key(st) {
                    err(format!("{p}.stages"), format!("no stage named `{st}`"));
                }
            }
            if let SinkConfig::ZmqPub(z) = s {
                if !z.endpoint.contains("://") {
                    err(
                        format!("{p}.endpoint"),
                        format!(
                            "`{}` is not a ZeroMQ endpoint like `tcp://127.0.0.1:5560`",
                            z.endpoint
                        ),
                    );
                }
            }
            if let SinkConfig::Jsonl(JsonlConfig {
                path: Some(path), ..
            }) = s
            {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                if path.as_os_str() != "-" && parent.is_some_and(|d| !d.is_dir()) {
                    err(
                        format!("{p}.path"),
                        format!("directory of {} does not exist", path.display()),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[sources.mea]
kind = "zmq"
endpoint = "tcp://127.0.0.1:5557"

[windows.w60]
source = "mea"
length_s = 60.0
hop_s = 1.0

[stages.episodes]
kind = "episodes"
window = "w60"
intervals_s = [[0.0, 0.005]]
min_count = 10

[sinks.out]
kind = "jsonl"
"#;

    fn errors(text: &str) -> Vec<ConfigError> {
        PipelineConfig::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .errors
    }

    #[test]
    fn a_good_file_validates() {
        let c = PipelineConfig::parse(GOOD, Path::new("t.toml")).unwrap();
        assert_eq!(c.sources.len(), 1);
        assert!(matches!(c.stages["episodes"], StageConfig::Episodes(_)));
    }

    #[test]
    fn search_stage_fields_are_validated() {
        let sensor = r#"
[sources.s]
kind = "hdf5"
path = "fixtures/spikes/A2929-200711/A2929-200711.nwb"
series = "/acquisition/CompassDirection/rz"

[windows.w]
source = "s"
length_samples = 100
hop_samples = 50

[stages.recall]
kind = "search"
window = "w"
m = 240
k = 0
leaf_capacity = 0

[sinks.out]
kind = "jsonl"
"#;
        let e = errors(sensor);
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        for want in [
            "stages.recall.m",
            "stages.recall.k",
            "stages.recall.leaf_capacity",
        ] {
            assert!(fields.contains(&want), "missing {want} in {e:#?}");
        }
        let ok = sensor
            .replace("m = 240", "m = 40")
            .replace("k = 0\nleaf_capacity = 0", "k = 2");
        let c = PipelineConfig::parse(&ok, Path::new("t.toml")).unwrap();
        assert!(
            matches!(&c.stages["recall"], StageConfig::Search(s) if s.k == 2 && s.m == Some(40))
        );
    }

    #[test]
    fn every_error_is_reported_at_once_with_its_field() {
        let bad = GOOD
            .replace("hop_s = 1.0", "hop_s = 0.0\nhop_ms = 5\nlength_samples = 3")
            .replace(
                "min_count = 10",
                "min_count = 10\nsupport = 0.1\nintervals = 3",
            )
            .replace("kind = \"jsonl\"", "kind = \"jsonl\"\nstages = [\"nope\"]")
            .replace(
                "endpoint = \"tcp://127.0.0.1:5557\"",
                "endpoint = \"127.0.0.1:5557\"\nspeed = 2.0",
            );
        let e = errors(&bad);
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        for want in [
            "sources.mea.speed",
            "sources.mea.endpoint",
            "windows.w60.hop_ms",
            "windows.w60.hop_s",
            "windows.w60.length_samples",
            "stages.episodes.intervals",
            "stages.episodes.support",
            "sinks.out.stages",
        ] {
            assert!(fields.contains(&want), "missing {want} in {e:#?}");
        }
        let text = ConfigErrors {
            file: "t.toml".into(),
            errors: e,
        }
        .to_string();
        assert!(
            text.contains("t.toml: `windows.w60.hop_s`: must be positive seconds, got 0"),
            "{text}"
        );
    }

    #[test]
    fn wrong_types_name_their_field() {
        let e = errors(&GOOD.replace("length_s = 60.0", "length_s = \"sixty\""));
        assert_eq!(e[0].field, "windows.w60.length_s");
        assert!(e[0].message.contains("invalid type"), "{e:?}");
    }

    #[test]
    fn references_and_stream_kinds_are_checked() {
        let e = errors(
            &GOOD
                .replace("window = \"w60\"", "window = \"w61\"")
                .replace(
                    "[sinks.out]\nkind = \"jsonl\"",
                    "[sinks.out]\nkind = \"kafka\"",
                ),
        );
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert!(fields.contains(&"stages.episodes.window"), "{e:?}");
        assert!(fields.contains(&"sinks.out.kind"), "{e:?}");
        let e = errors(&GOOD.replace(
            "kind = \"episodes\"\nwindow = \"w60\"\nintervals_s = [[0.0, 0.005]]\nmin_count = 10",
            "kind = \"summary\"\nwindow = \"w60\"",
        ));
        assert!(
            e[0].message
                .contains("carries spikes but this stage reads sensor"),
            "{e:?}"
        );
        let e = errors("[nonsense]\nx = 1\n");
        assert!(e.iter().any(|e| e.field == "nonsense"));
        assert!(e.iter().any(|e| e.field == "stages"));
        let e = errors("this is = not toml [");
        assert!(e[0].message.starts_with("not valid TOML"));
    }

    fn sensor_pipeline(stage: &str) -> String {
        format!(
            r#"
[sources.s]
kind = "hdf5"
path = "{nwb}"
series = "/acquisition/CompassDirection/rz"

[windows.w]
source = "s"
length_samples = 50
hop_samples = 50

[stages.shape]
kind = "shapelet"
window = "w"
{stage}

[sinks.out]
kind = "jsonl"
"#,
            nwb = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/fixtures/spikes/A2929-200711/A2929-200711.nwb"
            )
        )
    }

    #[test]
    fn shapelet_stages_are_checked() {
        let italy = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts"
        );
        let ok = sensor_pipeline(&format!(
            "train = \"{italy}\"\nmin_length = 4\nmax_length = 12\ndevice = \"cpu\""
        ));
        let c = PipelineConfig::parse(&ok, Path::new("t.toml")).unwrap();
        assert!(matches!(c.stages["shape"], StageConfig::Shapelet(_)));
        let fields = |text: &str| -> Vec<String> {
            errors(&sensor_pipeline(text))
                .into_iter()
                .map(|e| e.field)
                .collect()
        };
        assert_eq!(fields(""), ["stages.shape.model"]);
        assert_eq!(
            fields(&format!("train = \"{italy}\"\nmodel = \"m.json\"")),
            ["stages.shape.train"]
        );
        assert_eq!(
            fields(&format!("train = \"{italy}\"")),
            ["stages.shape.min_length", "stages.shape.max_length"]
        );
        assert_eq!(
            fields(&format!(
                "train = \"{italy}\"\nmin_length = 4\nmax_length = 30"
            )),
            ["stages.shape.max_length"]
        );
        assert_eq!(
            fields(&format!(
                "train = \"{italy}\"\nmin_length = 4\nmax_length = 8\nstep = 0"
            )),
            ["stages.shape.step"]
        );
        // Windows of 50 samples cannot hold shapelets of 60.
        let gun = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/ucr/GunPoint/GunPoint_TRAIN.ts"
        );
        assert_eq!(
            fields(&format!(
                "train = \"{gun}\"\nmin_length = 40\nmax_length = 60"
            )),
            ["stages.shape.window"]
        );
        let e = errors(&sensor_pipeline(
            "model = \"/nonexistent/m.json\"\nmin_length = 3",
        ));
        let f: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            f,
            ["stages.shape.min_length", "stages.shape.model"],
            "{e:?}"
        );
        assert!(e[1].message.contains("/nonexistent/m.json"), "{e:?}");
        let e = errors(&sensor_pipeline(
            "train = \"/nonexistent/t.ts\"\nmin_length = 3\nmax_length = 5",
        ));
        assert_eq!(e[0].field, "stages.shape.train");
        assert!(e[0].message.contains("/nonexistent/t.ts"), "{e:?}");
    }
}
