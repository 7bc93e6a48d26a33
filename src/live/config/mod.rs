//! Pipeline files (TOML): sources → windows → stages → sinks, validated before anything
//! starts.
//!
//! The loader knows the sections and their cross-references; each component's options,
//! checks and defaults live beside its code and are reached through the kinds tables
//! ([`crate::live::source::kinds::KINDS`], [`crate::live::stage::kinds::KINDS`], [`crate::live::sink::kinds::KINDS`]; one
//! generic table type, [`kinds::Kind`]).
//!
//! Validation runs in two phases and collects **every** error before reporting
//! ([`ConfigErrors`]): phase 1 parses each section on its own (unknown fields, wrong types,
//! missing fields), phase 2 checks values and references (units in option names: `_s`
//! seconds, `_samples`, `_bytes`, `_messages`). Each error names the file and the dotted
//! field, e.g. ``pipelines/x.toml: `windows.w60.hop_s`: must be positive, got 0``. Phase 2
//! returns each stage ready to build ([`StageSpec::builder`]): what it reads from files
//! (templates, models, training sets, calibrations) is read there, once.

pub mod kinds;
pub mod section;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use kinds::{Family, Kind, Spec};
use section::typed;
pub use section::{ConfigError, ConfigErrors, SocketMode};

use crate::live::sink::{self, SinkSpec};
use crate::live::source::{self, SourceSpec};
use crate::live::stage::{
    self, ParsedStage, Placement, SpikeContext, SpikeStageBuilder, StageBuilder,
};
use crate::live::window::WindowConfig;

/// `[pipeline]`: settings of the whole pipeline.
#[derive(Clone, Debug, Deserialize, Default)]
pub struct PipelineSection {
    /// Prometheus endpoint address, e.g. `127.0.0.1:9100` (overridden by `--metrics`).
    pub metrics: Option<String>,
    /// Windows queued between a window thread and each stage (default 4); a stage's own
    /// `queue_windows` overrides it ([`stage::QueueConfig`]).
    pub stage_queue_windows: Option<usize>,
    /// Serve the live view on this address, e.g. `127.0.0.1:8080` (overridden by `--ui`;
    /// `docs/live-view.md`).
    pub ui: Option<String>,
    /// Seconds of each raster of the live view (default 10).
    pub ui_span_s: Option<f64>,
    /// Host names the live view answers besides loopback ones (`localhost`, `127.0.0.1`,
    /// `[::1]`), in its requests' `Host` and `Origin` (`docs/live-view.md`, "Exposure").
    pub ui_hosts: Option<Vec<String>>,
    /// A token the live view requires (`Authorization: Bearer <token>`, or `?token=<token>`
    /// in the page's address); default none.
    pub ui_token: Option<String>,
}

/// A validated stage: its window, its parsed options and the stage ready to build.
#[derive(Debug)]
pub struct StageSpec {
    /// The window it reads.
    pub window: String,
    /// Its kind and options.
    pub parsed: ParsedStage,
    /// Its queue: `queue_windows` and `when_full` ([`StageSpec::queue_windows`],
    /// [`StageSpec::when_full`] resolve the defaults).
    pub queue: stage::QueueConfig,
    /// The stage, validated, ready to build.
    pub builder: Box<dyn StageBuilder>,
}

impl StageSpec {
    /// Windows queued for the stage: its `queue_windows`, else the pipeline's
    /// `stage_queue_windows`, else 4.
    #[must_use]
    pub fn queue_windows(&self, pipeline: &PipelineSection) -> usize {
        self.queue
            .queue_windows
            .or(pipeline.stage_queue_windows)
            .unwrap_or(4)
    }

    /// What happens to a window when the stage's queue is full (default block).
    #[must_use]
    pub fn when_full(&self) -> stage::WhenFull {
        self.queue.when_full.unwrap_or_default()
    }
}

/// A validated stage placed on a source's spikes: its source, its parsed options and the
/// stage ready to build.
#[derive(Debug)]
pub struct SpikeStageSpec {
    /// The spike source it reads.
    pub source: String,
    /// Its kind and options.
    pub parsed: ParsedStage,
    /// The stage, validated, ready to build.
    pub builder: Box<dyn SpikeStageBuilder>,
}

/// A validated pipeline.
#[derive(Debug)]
pub struct PipelineConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// `[pipeline]`.
    pub pipeline: PipelineSection,
    /// Sources by name.
    pub sources: BTreeMap<String, SourceSpec>,
    /// Windows by name.
    pub windows: BTreeMap<String, WindowConfig>,
    /// Stages on windows by name ([`Placement::Windows`]).
    pub stages: BTreeMap<String, StageSpec>,
    /// Stages on a source's spikes by name ([`Placement::Spikes`]: `kind = "detect"`, which
    /// reads a source spike by spike, before any window).
    pub spike_stages: BTreeMap<String, SpikeStageSpec>,
    /// Sinks by name.
    pub sinks: BTreeMap<String, SinkSpec>,
}

const SECTIONS: &[&str] = &["pipeline", "sources", "windows", "stages", "sinks"];

/// Removes `key` (a string naming one of `names`) from `table`.
fn take_name<'n>(
    table: &mut toml::Table,
    key: &str,
    prefix: &str,
    names: &[&'n str],
    errors: &mut Vec<ConfigError>,
) -> Option<&'n str> {
    let found = |k: &str| names.iter().copied().find(|n| *n == k);
    match table.remove(key) {
        Some(toml::Value::String(k)) if found(&k).is_some() => found(&k),
        Some(other) => {
            errors.push(ConfigError::new(
                format!("{prefix}.{key}"),
                format!("unknown {key} {other}; expected one of {names:?}"),
            ));
            None
        }
        None => {
            errors.push(ConfigError::new(
                format!("{prefix}.{key}"),
                format!("missing; expected one of {names:?}"),
            ));
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
                    errors.push(ConfigError::new(
                        format!("{name}.{k}"),
                        format!("must be a table (`[{name}.{k}]`)"),
                    ));
                    None
                }
            })
            .collect(),
        Some(_) => {
            errors.push(ConfigError::new(
                name,
                format!("must be a table of named entries (`[{name}.<name>]`)"),
            ));
            Vec::new()
        }
    }
}

/// The keys that name files, per section (`-` in a sink means standard output).
const PATH_KEYS: &[(&str, &[&str])] = &[
    ("sources", &["path"]),
    ("sinks", &["path"]),
    (
        "stages",
        &[
            "model",
            "train",
            "templates",
            "calibration",
            "episodes_file",
        ],
    ),
];

/// Rewrites every relative file path of the pipeline (`PATH_KEYS`) against `dir`, the
/// pipeline file's folder, so a pipeline runs the same from any working directory (as
/// Cargo and Compose resolve their files' paths).
fn resolve_paths(root: &mut toml::Table, dir: &Path) {
    for (section, keys) in PATH_KEYS {
        let Some(toml::Value::Table(entries)) = root.get_mut(*section) else {
            continue;
        };
        for (_, entry) in entries.iter_mut() {
            let toml::Value::Table(t) = entry else {
                continue;
            };
            for key in *keys {
                if let Some(toml::Value::String(v)) = t.get_mut(*key)
                    && v != "-"
                    && Path::new(v.as_str()).is_relative()
                {
                    *v = dir.join(v.as_str()).display().to_string();
                }
            }
        }
    }
}

impl PipelineConfig {
    /// Reads and validates a pipeline file. Relative file paths in it (sources' and sinks'
    /// `path`, stages' `model`, `train`, `templates`, `calibration`) are resolved against the
    /// file's folder.
    ///
    /// # Errors
    /// [`ConfigErrors`] with every error found.
    pub fn load(file: &Path) -> Result<Self, ConfigErrors> {
        let text = std::fs::read_to_string(file).map_err(|e| ConfigErrors {
            file: file.into(),
            errors: vec![ConfigError::new("", format!("cannot read: {e}"))],
        })?;
        Self::parse(&text, file)
    }

    /// Validates pipeline text; `file` names it in errors, and its folder (if it has one)
    /// anchors the relative file paths.
    ///
    /// Each section is read by a function of its own, phase 1 (each entry on its own) then
    /// phase 2 (values and references): `parse_pipeline` / `check_pipeline`,
    /// `parse_kinds` / `check_sources`, `parse_windows` / `check_windows`,
    /// `parse_stages` / `check_stages`, `parse_kinds` / `check_sinks` (private, in this
    /// module).
    ///
    /// # Errors
    /// [`ConfigErrors`] with every error found.
    pub fn parse(text: &str, file: &Path) -> Result<Self, ConfigErrors> {
        let mut errors = Vec::new();
        let mut root: toml::Table = toml::from_str(text).map_err(|e| ConfigErrors {
            file: file.into(),
            errors: vec![ConfigError::new(
                "",
                format!("not valid TOML: {}", e.to_string().trim_end()),
            )],
        })?;
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            resolve_paths(&mut root, dir);
        }
        for key in root.keys() {
            if !SECTIONS.contains(&key.as_str()) {
                errors.push(ConfigError::new(
                    key.clone(),
                    format!("unknown section; expected one of {SECTIONS:?}"),
                ));
            }
        }
        // Phase 1: each section on its own.
        let pipeline = parse_pipeline(&mut root, &mut errors);
        let sources = parse_kinds(&mut root, "sources", source::kinds::KINDS, &mut errors);
        let windows = parse_windows(&mut root, &mut errors);
        let parsed_stages = parse_stages(&mut root, &mut errors);
        let sinks = parse_kinds(&mut root, "sinks", sink::kinds::KINDS, &mut errors);

        // Phase 2: values and references.
        check_pipeline(&pipeline, &mut errors);
        check_sources(&sources, &windows, &parsed_stages, &mut errors);
        check_windows(&windows, &sources, &mut errors);
        // Stages on windows count by name once parsed; stages on spikes once validated.
        let window_stages: BTreeSet<String> = parsed_stages
            .iter()
            .filter(|s| s.parsed.kind.row.placement == Placement::Windows)
            .map(|s| s.name.clone())
            .collect();
        let (stages, spike_stages) = check_stages(parsed_stages, &sources, &windows, &mut errors);
        check_sinks(&sinks, &window_stages, &spike_stages, &mut errors);
        if !errors.is_empty() {
            return Err(ConfigErrors {
                file: file.into(),
                errors,
            });
        }
        Ok(Self {
            file: file.into(),
            pipeline,
            sources,
            windows,
            stages,
            spike_stages,
            sinks,
        })
    }
}

/// Phase 1 of `[pipeline]`.
fn parse_pipeline(root: &mut toml::Table, errors: &mut Vec<ConfigError>) -> PipelineSection {
    match root.remove("pipeline") {
        Some(v) => typed(v, "pipeline", errors).unwrap_or_default(),
        None => PipelineSection::default(),
    }
}

/// Phase 1 of a section of kinds (`[sources.*]`, `[sinks.*]`): each entry's `kind` looked up
/// in the family's `table`, its options parsed by the kind.
fn parse_kinds<F: Family>(
    root: &mut toml::Table,
    section: &str,
    table: &'static [Kind<F>],
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, Spec<F>> {
    let names = kinds::names(table);
    let mut specs = BTreeMap::new();
    for (name, mut t) in sections(root, section, errors) {
        let p = format!("{section}.{name}");
        let Some(kind) = take_name(&mut t, "kind", &p, &names, errors) else {
            continue;
        };
        let Some(kind) = kinds::named(table, kind) else {
            continue;
        };
        if let Some(s) = kind.parse(toml::Value::Table(t), &p, errors) {
            specs.insert(name, s);
        }
    }
    specs
}

/// Phase 1 of `[windows.*]`.
fn parse_windows(
    root: &mut toml::Table,
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, WindowConfig> {
    let mut windows = BTreeMap::new();
    for (name, t) in sections(root, "windows", errors) {
        let p = format!("windows.{name}");
        if let Some(mut w) = typed::<WindowConfig>(toml::Value::Table(t), &p, errors) {
            w.name.clone_from(&name);
            windows.insert(name, w);
        }
    }
    windows
}

/// A stage section after phase 1: its name, what it reads (by its kind's
/// [`Placement`]: a window's name, or a spike source's), and its parsed options.
struct ParsedSection {
    name: String,
    reads: String,
    parsed: ParsedStage,
    queue: stage::QueueConfig,
}

/// Takes a stage section's queue options (`queue_windows`, `when_full`: the loader's, as
/// `window` is, for every kind), parsed; the default when the section has neither or they
/// do not parse (then in `errors`).
fn take_queue(
    t: &mut toml::Table,
    prefix: &str,
    errors: &mut Vec<ConfigError>,
) -> stage::QueueConfig {
    let mut q = toml::Table::new();
    for key in ["queue_windows", "when_full"] {
        if let Some(v) = t.remove(key) {
            q.insert(key.to_owned(), v);
        }
    }
    typed(toml::Value::Table(q), prefix, errors).unwrap_or_default()
}

/// Takes the string `key` of a stage section (its `window` or `source`); `missing` is the
/// message when it is absent, `what` names it when it is not a string.
fn take_reference(
    t: &mut toml::Table,
    key: &str,
    prefix: &str,
    what: &str,
    missing: String,
    errors: &mut Vec<ConfigError>,
) -> Option<String> {
    match t.remove(key) {
        Some(toml::Value::String(s)) => Some(s),
        Some(other) => {
            errors.push(ConfigError::new(
                format!("{prefix}.{key}"),
                format!("must be the name of {what}, got {other}"),
            ));
            None
        }
        None => {
            errors.push(ConfigError::new(format!("{prefix}.{key}"), missing));
            None
        }
    }
}

/// Phase 1 of `[stages.*]`: each entry's `kind` looked up in the stage kinds table; then,
/// as the kind's row places it, its `window` (a stage on windows, or of an unknown kind) or
/// its `source` (a stage on a source's spikes); its options parsed by the kind.
fn parse_stages(root: &mut toml::Table, errors: &mut Vec<ConfigError>) -> Vec<ParsedSection> {
    let stage_kinds = kinds::names(stage::kinds::KINDS);
    let mut parsed_stages = Vec::new();
    for (name, mut t) in sections(root, "stages", errors) {
        let p = format!("stages.{name}");
        let kind = take_name(&mut t, "kind", &p, &stage_kinds, errors)
            .and_then(|k| kinds::named(stage::kinds::KINDS, k));
        let reads = match kind {
            Some(k) if k.row.placement == Placement::Spikes => take_reference(
                &mut t,
                "source",
                &p,
                "a spike source",
                format!(
                    "missing: the spike source a {} stage reads (it reads spikes as they \
                     arrive, not windows)",
                    k.name
                ),
                errors,
            ),
            _ => take_reference(
                &mut t,
                "window",
                &p,
                "a window",
                "missing: the window the stage reads".into(),
                errors,
            ),
        };
        let queue = take_queue(&mut t, &p, errors);
        let Some(kind) = kind else {
            continue;
        };
        if let (Some(parsed), Some(reads)) = (kind.parse(toml::Value::Table(t), &p, errors), reads)
        {
            parsed_stages.push(ParsedSection {
                name,
                reads,
                parsed,
                queue,
            });
        }
    }
    parsed_stages
}

/// Phase 2 of `[sources.*]`: each source's own checks; a source that feeds nothing is
/// logged.
fn check_sources(
    sources: &BTreeMap<String, SourceSpec>,
    windows: &BTreeMap<String, WindowConfig>,
    stages: &[ParsedSection],
    errors: &mut Vec<ConfigError>,
) {
    for (name, s) in sources {
        let p = format!("sources.{name}");
        errors.extend(s.validate().into_iter().map(|e| e.within(&p)));
        let read_by_a_stage = stages
            .iter()
            .any(|st| st.parsed.kind.row.placement == Placement::Spikes && &st.reads == name);
        if !windows.values().any(|w| &w.source == name) && !read_by_a_stage {
            tracing::warn!(source = %name, "Source feeds no window and no detect stage.");
        }
    }
}

/// Phase 2 of `[windows.*]`: each window's source, and its options against what the source
/// produces.
fn check_windows(
    windows: &BTreeMap<String, WindowConfig>,
    sources: &BTreeMap<String, SourceSpec>,
    errors: &mut Vec<ConfigError>,
) {
    for (name, w) in windows {
        let p = format!("windows.{name}");
        match sources.get(&w.source) {
            None => errors.push(ConfigError::new(
                format!("{p}.source"),
                format!("no source named `{}`", w.source),
            )),
            Some(source) => errors.extend(
                w.validate(source.produces())
                    .into_iter()
                    .map(|e| e.within(&p)),
            ),
        }
    }
}

/// Phase 2 of `[stages.*]`: the stages on windows first (each window, its stream kind, the
/// kind's own checks against the window), then those on a source's spikes (their source, the
/// kind's own checks, which may read a validated window stage's options: a detect stage's
/// `from_stage`). Every stage validated, ready to build, by placement.
fn check_stages(
    parsed: Vec<ParsedSection>,
    sources: &BTreeMap<String, SourceSpec>,
    windows: &BTreeMap<String, WindowConfig>,
    errors: &mut Vec<ConfigError>,
) -> (
    BTreeMap<String, StageSpec>,
    BTreeMap<String, SpikeStageSpec>,
) {
    let (on_spikes, on_windows): (Vec<_>, Vec<_>) = parsed
        .into_iter()
        .partition(|s| s.parsed.kind.row.placement == Placement::Spikes);
    let mut stages = BTreeMap::new();
    for ParsedSection {
        name,
        reads: window_name,
        parsed,
        queue,
    } in on_windows
    {
        let p = format!("stages.{name}");
        if queue.queue_windows == Some(0) {
            errors.push(ConfigError::new(
                format!("{p}.queue_windows"),
                "must be at least 1",
            ));
        }
        let Some(window) = windows.get(&window_name) else {
            errors.push(ConfigError::new(
                format!("{p}.window"),
                format!("no window named `{window_name}`"),
            ));
            continue;
        };
        if let Some(src) = sources.get(&window.source)
            && src.produces() != parsed.kind.row.input
        {
            errors.push(ConfigError::new(
                format!("{p}.window"),
                format!(
                    "window `{window_name}` carries {} but this stage reads {}",
                    src.produces(),
                    parsed.kind.row.input
                ),
            ));
            continue;
        }
        match parsed.validate(window) {
            Ok(builder) => {
                stages.insert(
                    name,
                    StageSpec {
                        window: window_name,
                        parsed,
                        queue,
                        builder,
                    },
                );
            }
            Err(list) => errors.extend(list.into_iter().map(|e| e.within(&p))),
        }
    }
    let mut spike_stages = BTreeMap::new();
    for ParsedSection {
        name,
        reads: source,
        parsed,
        queue,
    } in on_spikes
    {
        let p = format!("stages.{name}");
        if queue.is_set() {
            let key = if queue.queue_windows.is_some() {
                "queue_windows"
            } else {
                "when_full"
            };
            errors.push(ConfigError::new(
                format!("{p}.{key}"),
                format!(
                    "a {} stage reads spikes on its source's window thread and has no queue of windows",
                    parsed.kind.name
                ),
            ));
        }
        match sources.get(&source) {
            None => {
                errors.push(ConfigError::new(
                    format!("{p}.source"),
                    format!("no source named `{source}`"),
                ));
                continue;
            }
            Some(src) if src.produces() != parsed.kind.row.input => {
                errors.push(ConfigError::new(
                    format!("{p}.source"),
                    format!(
                        "source `{source}` carries {} but a {} stage reads {}",
                        src.produces(),
                        parsed.kind.name,
                        parsed.kind.row.input
                    ),
                ));
                continue;
            }
            Some(_) => {}
        }
        let stage = |s: &str| stages.get(s).map(|st: &StageSpec| &st.parsed);
        let at = SpikeContext {
            source: &source,
            stage: &stage,
        };
        match parsed.validate_on_spikes(&at) {
            Ok(builder) => {
                spike_stages.insert(
                    name,
                    SpikeStageSpec {
                        source,
                        parsed,
                        builder,
                    },
                );
            }
            Err(list) => errors.extend(list.into_iter().map(|e| e.within(&p))),
        }
    }
    (stages, spike_stages)
}

/// Phase 2 of `[sinks.*]`: there is a stage (`window_stages`: the stages on windows that
/// parsed) and a sink; each sink's stages exist (and are
/// detect stages for a kind that takes only those); each sink's own checks.
fn check_sinks(
    sinks: &BTreeMap<String, SinkSpec>,
    window_stages: &BTreeSet<String>,
    spike_stages: &BTreeMap<String, SpikeStageSpec>,
    errors: &mut Vec<ConfigError>,
) {
    let stage_names: BTreeSet<&String> = window_stages.iter().chain(spike_stages.keys()).collect();
    if stage_names.is_empty() {
        errors.push(ConfigError::new("stages", "the pipeline has no stage"));
    }
    if sinks.is_empty() {
        errors.push(ConfigError::new("sinks", "the pipeline has no sink"));
    }
    for (name, s) in sinks {
        let p = format!("sinks.{name}");
        for st in s.stages().unwrap_or_default() {
            if !stage_names.contains(st) {
                errors.push(ConfigError::new(
                    format!("{p}.stages"),
                    format!("no stage named `{st}`"),
                ));
            } else if let Some(why) = s.kind.row.only_detect_stages
                && !spike_stages.contains_key(st)
            {
                errors.push(ConfigError::new(
                    format!("{p}.stages"),
                    format!("`{st}` is not a detect stage; {why}"),
                ));
            }
        }
        errors.extend(s.validate().into_iter().map(|e| e.within(&p)));
    }
}

/// Phase 2 of `[pipeline]`.
fn check_pipeline(pipeline: &PipelineSection, errors: &mut Vec<ConfigError>) {
    if let Some(m) = &pipeline.metrics
        && m.parse::<std::net::SocketAddr>().is_err()
    {
        errors.push(ConfigError::new(
            "pipeline.metrics",
            format!("`{m}` is not an address like `127.0.0.1:9100`"),
        ));
    }
    if let Some(u) = &pipeline.ui
        && u.parse::<std::net::SocketAddr>().is_err()
    {
        errors.push(ConfigError::new(
            "pipeline.ui",
            format!("`{u}` is not an address like `127.0.0.1:8080`"),
        ));
    }
    if let Some(span) = pipeline.ui_span_s
        && !(span.is_finite() && span > 0.0)
    {
        errors.push(ConfigError::new(
            "pipeline.ui_span_s",
            format!("must be finite seconds > 0, got {span}"),
        ));
    }
    for (i, h) in pipeline.ui_hosts.iter().flatten().enumerate() {
        if h.is_empty() || (h.contains(['/', ' ', ':']) && !h.starts_with('[')) {
            errors.push(ConfigError::new(
                format!("pipeline.ui_hosts[{i}]"),
                format!(
                    "`{h}` is not a host name like `rig.lab.example` (no scheme, port or path)"
                ),
            ));
        }
    }
    if pipeline
        .ui_token
        .as_ref()
        .is_some_and(|t| t.len() < 16 || !t.bytes().all(|b| b.is_ascii_graphic()))
    {
        errors.push(ConfigError::new(
            "pipeline.ui_token",
            "must be at least 16 printable characters without spaces",
        ));
    }
    if pipeline.stage_queue_windows == Some(0) {
        errors.push(ConfigError::new(
            "pipeline.stage_queue_windows",
            "must be at least 1",
        ));
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
        assert_eq!(c.stages["episodes"].parsed.kind.name, "episodes");
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
        let search = c.stages["recall"]
            .parsed
            .options::<crate::live::stage::search::SearchStageConfig>();
        assert!(
            search.is_some_and(|s| s.k == 2 && s.m == Some(40)),
            "{search:?}"
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
    fn a_stage_queue_is_declared_on_the_stage_and_checked() {
        use crate::live::stage::WhenFull;
        // Defaults: the pipeline's `stage_queue_windows` (else 4), and block.
        let c = PipelineConfig::parse(GOOD, Path::new("t.toml")).unwrap();
        assert_eq!(c.stages["episodes"].queue_windows(&c.pipeline), 4);
        assert_eq!(c.stages["episodes"].when_full(), WhenFull::Block);
        let text = format!("[pipeline]\nstage_queue_windows = 7\n{GOOD}");
        let c = PipelineConfig::parse(&text, Path::new("t.toml")).unwrap();
        assert_eq!(c.stages["episodes"].queue_windows(&c.pipeline), 7);
        // The stage's own options win.
        let own = text.replace(
            "min_count = 10",
            "min_count = 10\nqueue_windows = 2\nwhen_full = \"drop_oldest\"",
        );
        let c = PipelineConfig::parse(&own, Path::new("t.toml")).unwrap();
        assert_eq!(c.stages["episodes"].queue_windows(&c.pipeline), 2);
        assert_eq!(c.stages["episodes"].when_full(), WhenFull::DropOldest);
        // Bad values name their field; a detect stage has no queue.
        let bad = GOOD.replace(
            "min_count = 10",
            "min_count = 10\nqueue_windows = 0\nwhen_full = \"drop\"",
        );
        let e = errors(&bad);
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert!(fields.contains(&"stages.episodes.when_full"), "{e:?}");
        assert!(
            e.iter().any(|e| e.message.contains("drop_newest")),
            "the values are listed: {e:?}"
        );
        let bad = GOOD.replace("min_count = 10", "min_count = 10\nqueue_windows = 0");
        let e = errors(&bad);
        assert_eq!(e[0].field, "stages.episodes.queue_windows", "{e:?}");
        let detect = format!(
            "{GOOD}\n[stages.watch]\nkind = \"detect\"\nsource = \"mea\"\nepisodes = [\"1-(0,5]ms-2\"]\nwhen_full = \"drop_newest\"\n"
        );
        let e = errors(&detect);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].field, "stages.watch.when_full");
        assert!(e[0].message.contains("no queue of windows"), "{e:?}");
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
        // The significance table of an episodes stage: an unknown procedure or method is an
        // error of its field when the table is read (typed, like `device`), unknown fields
        // are named too; the values are checked together, every bad one named.
        let sig = GOOD.replace(
            "min_count = 10",
            "min_count = 10\n[stages.episodes.significance]\nsurrogates = \"dither:0.015\"\ncorrection = \"max-z\"\nalhpa = 0.1",
        );
        let e = errors(&sig);
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        for f in [
            "stages.episodes.significance.alhpa",
            "stages.episodes.significance.correction",
        ] {
            assert!(fields.contains(&f), "{f} in {e:?}");
        }
        assert!(
            e.iter()
                .any(|e| e.message.contains("unknown correction `max-z`")),
            "{e:?}"
        );
        let sig = GOOD.replace(
            "min_count = 10",
            "min_count = 10\n[stages.episodes.significance]\nsurrogates = \"dither:0.015\"\nn_surrogates = 0\nalpha = 2.0\ncorrection = \"spectrum\"\nsample_split = 0.5",
        );
        let fields: Vec<String> = errors(&sig).into_iter().map(|e| e.field).collect();
        for f in [
            "stages.episodes.significance.n_surrogates",
            "stages.episodes.significance.alpha",
            "stages.episodes.significance.sample_split",
        ] {
            assert!(fields.iter().any(|x| x == f), "{f} in {fields:?}");
        }
        let good = GOOD.replace(
            "min_count = 10",
            "min_count = 10\n[stages.episodes.significance]\nsurrogates = \"isi-dither:0.015\"",
        );
        assert!(PipelineConfig::parse(&good, Path::new("t.toml")).is_ok());
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
        assert_eq!(c.stages["shape"].parsed.kind.name, "shapelet");
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
