//! Flags shared by several commands, each declared once and flattened
//! (`#[command(flatten)]`) where it is taken: `--device`, `--format`, `--output`, the reader
//! flags of a spike recording (`ReaderArgs`, in `InputArgs` and `RecordingArgs`), the mining
//! options (with the `--intervals` parser), the significance test (`SurrogateArgs`,
//! `SignificantOnlyArg`, `SignificanceArgs`) and the benchmark workloads, plus the reader of
//! labelled collections two commands name. Command files import this module and the library,
//! never each other.

use std::fs::File;
use std::io::{self, BufWriter, LineWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::builder::Resettable;
use clap::{Arg, Args, ValueEnum};
use serde::Serialize;
use synfire::device::{DeviceChoice, DeviceTarget};
use synfire::episode::hybrid::ExactAlgorithm;
use synfire::episode::options::DEFAULT_MAX_LEVEL;
use synfire::episode::{
    GpuSettings, Interval, IntervalSpec, MemoryBudget, MinerConfig, MiningOptions, Threshold,
};
use synfire::event::{EventStream, Ordering};
use synfire::ingest;
use synfire::series::read_dataset;
use synfire::shapelet::univariate;
use synfire::significance::options::{
    DEFAULT_ALPHA, DEFAULT_CORRECTION, DEFAULT_N_SURROGATES, DEFAULT_SEED,
};
use synfire::significance::{Correction, SignificanceOptions, SurrogateMethod};
use synfire::synth::{self, SynthParams};

/// `--device`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DeviceArg {
    /// GPUs when present, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// GPUs only.
    Gpu,
}

/// The library's choice as the flag names it: the flag's default is the library's
/// ([`DeviceChoice::default`]).
impl From<DeviceChoice> for DeviceArg {
    fn from(d: DeviceChoice) -> Self {
        match d {
            DeviceChoice::Auto => Self::Auto,
            DeviceChoice::Cpu => Self::Cpu,
            DeviceChoice::Gpu => Self::Gpu,
        }
    }
}

impl From<DeviceArg> for DeviceChoice {
    fn from(d: DeviceArg) -> Self {
        match d {
            DeviceArg::Auto => Self::Auto,
            DeviceArg::Cpu => Self::Cpu,
            DeviceArg::Gpu => Self::Gpu,
        }
    }
}

/// `--device` and `--gpus`, flattened into every command that computes on a GPU.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Where to compute: the GPU path when a GPU starts, else the CPU (`auto`), the CPU
    /// reference, or GPUs only (`gpu`: no usable GPU is an error).
    #[arg(long, value_enum, default_value_t = DeviceArg::from(DeviceChoice::default()))]
    pub device: DeviceArg,
    /// GPU ordinals (CUDA numbering), comma-separated. Episode mining spreads over all of them
    /// (default: every GPU found); the sensor commands run on one GPU (default: the first).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Option<Vec<usize>>,
}

impl DeviceArgs {
    /// The target of a command that runs on one GPU: `--device` on the one ordinal `--gpus`
    /// names (the first GPU when absent).
    ///
    /// # Errors
    /// `--gpus` names more than one GPU, or names GPUs with `--device cpu`.
    pub fn single(&self, command: &str) -> Result<DeviceTarget> {
        let choice = DeviceChoice::from(self.device);
        match self.gpus.as_deref() {
            None => Ok(choice.on(None)),
            Some(_) if choice == DeviceChoice::Cpu => anyhow::bail!(
                "`--gpus` names GPUs but `--device cpu` computes on the CPU; drop one of them"
            ),
            Some([gpu]) => Ok(choice.on(Some(*gpu))),
            Some(many) => anyhow::bail!(
                "`synfire {command}` runs on one GPU, but `--gpus` names {} ({many:?}); give one ordinal",
                many.len()
            ),
        }
    }
}

/// `--format` of every command that prints a result (each command keeps its own default).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum FormatArg {
    /// Plain text: lines or a table.
    Text,
    /// One JSON document.
    Json,
}

/// `--output FILE` of every command that prints a result: standard output when absent.
#[derive(Debug, Clone, Args)]
pub struct OutputArg {
    /// Write the result here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

impl OutputArg {
    /// A buffered writer on the `--output` file (created now) or on standard output, for a
    /// result written at once. Flush it at the end.
    ///
    /// # Errors
    /// The file cannot be created (the error names `--output` and the path).
    pub fn writer(&self) -> Result<Box<dyn Write>> {
        Ok(match &self.output {
            Some(path) => Box::new(BufWriter::new(create(path)?)),
            None => Box::new(BufWriter::new(io::stdout().lock())),
        })
    }

    /// A line-buffered writer on the `--output` file (created now) or on standard output, for
    /// lines and tables printed while the command runs (benchmarks, `validate`).
    ///
    /// # Errors
    /// The file cannot be created (the error names `--output` and the path).
    pub fn line_writer(&self) -> Result<Box<dyn Write>> {
        Ok(match &self.output {
            Some(path) => Box::new(LineWriter::new(create(path)?)),
            None => Box::new(io::stdout()),
        })
    }
}

/// How to read a spike recording: every reader flag of the commands that read one (`mine`,
/// `count`, `plot raster`, and `batch` for each of its sessions), declared here once.
///
/// The input's path is not among them ([`InputArgs`] adds it), since `batch` reads its paths
/// from a sessions file. Serialised (`serde`, one key per flag: `sort`, `units`, `unit_key`,
/// …), these flags are the reader options `batch` hands the Python side
/// (`python -m synfire.cluster batch --reader-json`).
#[derive(Debug, Clone, Args, Serialize)]
pub struct ReaderArgs {
    /// Sort the input by time instead of rejecting an unsorted stream.
    #[arg(long)]
    pub sort: bool,
    /// phy/Kilosort: keep only the clusters of these groups, comma-separated (phy's
    /// `cluster_group.tsv`, else `cluster_info.tsv`, else Kilosort's `cluster_KSLabel.tsv`;
    /// unlabelled clusters are `unsorted`), e.g. `good` or `good,mua`. Open Ephys binary:
    /// `sorted` (sorted id ≠ 0) or `unsorted` (sorted id 0).
    #[arg(long, value_delimiter = ',')]
    pub units: Option<Vec<String>>,
    /// Open Ephys binary: how units are named, as the live Open Ephys source's `unit_key`:
    /// `electrode_sorted_id` (default, `Electrode 1/0`), `electrode` or `full`
    /// (`stream/electrode/sorted_id`).
    #[arg(long, value_name = "KEY", value_parser = parse_unit_key)]
    pub unit_key: Option<ingest::openephys::UnitKey>,
    /// CSV: the header name of the time column (seconds).
    #[arg(long)]
    pub time_column: Option<String>,
    /// CSV: the header name of the unit column.
    #[arg(long)]
    pub unit_column: Option<String>,
    /// NWB: label each unit by this column of the units table and its id, e.g. `--unit-label
    /// location` gives `adn:6`.
    #[arg(long, value_name = "COLUMN")]
    pub unit_label: Option<String>,
    /// NWB: keep only the spikes inside the epochs with these tags, comma-separated (rows of
    /// `/intervals/epochs`, or of `--epochs-table`; `*` takes every row), e.g. `wake`.
    #[arg(long, value_delimiter = ',', value_name = "TAGS")]
    pub epochs: Option<Vec<String>>,
    /// NWB: the TimeIntervals table under `/intervals/` that `--epochs` reads (default
    /// `epochs`; e.g. `trials` with `--epochs '*'`).
    #[arg(long, requires = "epochs", value_name = "NAME")]
    pub epochs_table: Option<String>,
}

impl ReaderArgs {
    /// Reads `input` with these flags; `sample_rate_hz` (the command's `--sample-rate-hz`)
    /// stands in for a phy folder's `params.py` rate.
    ///
    /// # Errors
    /// Any reader error (it names the file and what is wrong), or an option the input's
    /// format has no use for.
    pub fn read(&self, input: &Path, sample_rate_hz: Option<f64>) -> Result<EventStream> {
        let ordering = if self.sort {
            Ordering::SortIfNeeded
        } else {
            Ordering::RequireSorted
        };
        let phy = ingest::InputFormat::from_path(input)? == ingest::InputFormat::Phy;
        let options = ingest::ReadOptions {
            ordering,
            columns: ingest::csv::Columns {
                time: self.time_column.clone(),
                unit: self.unit_column.clone(),
            },
            groups: self.units.clone(),
            sample_rate_hz: sample_rate_hz.filter(|_| phy),
            unit_label: self.unit_label.clone(),
            epochs: self.epochs.clone(),
            epochs_table: self.epochs_table.clone(),
            unit_key: self.unit_key,
        };
        Ok(ingest::read_spikes_with(input, &options)?)
    }
}

/// The spike input of a command and how to read it: the path and the [`ReaderArgs`].
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Spikes: `.nwb`/`.h5`/`.hdf5` (NWB units table), `.csv`/`.txt` (`label,time_s` lines,
    /// or columns named by a header), a phy/Kilosort folder (`spike_times.npy`,
    /// `spike_clusters.npy`, `params.py`), or an Open Ephys binary recording
    /// (`structure.oebin`, or its recording, experiment or Record Node folder).
    pub input: PathBuf,
    /// How to read it.
    #[command(flatten)]
    pub reader: ReaderArgs,
}

impl InputArgs {
    /// Reads the input ([`ReaderArgs::read`]).
    ///
    /// # Errors
    /// As [`ReaderArgs::read`].
    pub fn read(&self, sample_rate_hz: Option<f64>) -> Result<EventStream> {
        self.reader.read(&self.input, sample_rate_hz)
    }
}

/// The input of a command that reads a recording and mines nothing (`count`, `plot raster`):
/// [`InputArgs`] and the `--sample-rate-hz` a phy folder may need. (`mine` and `batch` take
/// `--sample-rate-hz` from [`MiningArgs`], where it also sets the clock of `--intervals`.)
#[derive(Debug, Clone, Args)]
pub struct RecordingArgs {
    /// The input and how to read it.
    #[command(flatten)]
    pub input: InputArgs,
    /// phy/Kilosort: the sampling rate (Hz) when the folder's `params.py` lacks it.
    #[arg(long)]
    pub sample_rate_hz: Option<f64>,
}

impl RecordingArgs {
    /// Reads the input ([`ReaderArgs::read`] with `--sample-rate-hz`).
    ///
    /// # Errors
    /// As [`ReaderArgs::read`].
    pub fn read(&self) -> Result<EventStream> {
        self.input.read(self.sample_rate_hz)
    }

    /// The input's path.
    pub fn path(&self) -> &Path {
        &self.input.input
    }
}

fn parse_unit_key(s: &str) -> Result<ingest::openephys::UnitKey, String> {
    s.parse()
}

fn create(path: &Path) -> Result<File> {
    File::create(path).with_context(|| format!("creating `--output` file {}", path.display()))
}

/// Options shared by everything that mines.
#[derive(Debug, Args, Clone)]
pub struct MiningArgs {
    /// Inter-event delay intervals, comma-separated, each `(LOW,HIGH]`, `[LOW,HIGH]` (a closed
    /// lower bound: `[0,0.001]` admits simultaneous spikes, lag-0 synchrony) or `LOW-HIGH`
    /// (meaning `(LOW,HIGH]`), in seconds, or in samples with `--sample-rate-hz`; e.g.
    /// `"[0,0.001],(0.004,0.006]"`.
    #[arg(long)]
    pub intervals: String,
    /// Read `--intervals` in whole samples of a clock at this rate (Hz), e.g. `--sample-rate-hz
    /// 30000 --intervals "[0,5],(5,150]"`: a delay counts as its nearest whole number of
    /// samples, so boundaries do not depend on the rounding of `sample / rate`.
    #[arg(long)]
    pub sample_rate_hz: Option<f64>,
    /// Minimum number of non-overlapped occurrences.
    #[arg(long, conflicts_with = "support")]
    pub min_count: Option<u64>,
    /// Support threshold: a fraction of the number of events (default 0.001), or occurrences
    /// per second with `--support-per seconds`.
    #[arg(long)]
    pub support: Option<f64>,
    /// What `--support` is relative to.
    #[arg(long, value_enum, default_value_t = SupportPer::from(synfire::episode::SupportPer::default()), requires = "support")]
    pub support_per: SupportPer,
    /// Largest episode size N.
    #[arg(long, default_value_t = DEFAULT_MAX_LEVEL)]
    pub max_level: usize,
    /// Count every candidate exactly instead of PreElim first (same result, slower).
    #[arg(long)]
    pub one_pass: bool,
    /// Count every join candidate instead of removing those whose successor bound is below
    /// the threshold first (same result, slower; for comparisons).
    #[arg(long)]
    pub no_bounds: bool,
    /// Stop before a level with more candidates than this; the finished levels are written,
    /// marked as truncated, with a threshold that would fit.
    #[arg(long)]
    pub max_candidates: Option<u64>,
    /// Stop after this many seconds of mining; the finished levels are written, marked as
    /// truncated, with a threshold that would fit.
    #[arg(long)]
    pub time_budget_s: Option<f64>,
    /// Stop a level before the process holds more memory than this: `auto` (what it holds at
    /// the start plus a third of the memory available then, cgroup limits included), `off`,
    /// or a size such as `8G` or `512M`; the finished levels are written, marked as
    /// truncated, with a threshold that would fit.
    #[arg(long, default_value = "auto", value_name = "auto|off|SIZE")]
    pub memory_budget: MemoryBudget,
    /// `--device` and `--gpus`: where to count (every GPU found or listed, falling back to the
    /// CPU with `auto`).
    #[command(flatten)]
    pub device: DeviceArgs,
    /// GPU kernel for exact counts: PTPE or MTPE per level by Eq. 3 (`hybrid`), or one of them
    /// always.
    #[arg(long, value_enum, default_value_t = ExactKernelArg::from(ExactAlgorithm::default()))]
    pub exact_kernel: ExactKernelArg,
    /// Calibration file for the hybrid choice (default: the one `synfire calibrate` stored for
    /// each GPU model, if any).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
}

impl MiningArgs {
    /// These flags as the library's [`MiningOptions`] (the type the episodes stage of a
    /// pipeline reads too, with the same names and defaults).
    pub fn options(&self) -> MiningOptions {
        let specs: Vec<IntervalSpec> = Interval::split_list(&self.intervals)
            .into_iter()
            .map(|part| IntervalSpec::Text(part.to_owned()))
            .collect();
        let (intervals_s, intervals_samples) = if self.sample_rate_hz.is_some() {
            (Vec::new(), specs)
        } else {
            (specs, Vec::new())
        };
        MiningOptions {
            intervals_s,
            intervals_samples,
            sample_rate_hz: self.sample_rate_hz,
            min_count: self.min_count,
            support: self.support,
            support_per: match self.support_per {
                SupportPer::Events => synfire::episode::SupportPer::Events,
                SupportPer::Seconds => synfire::episode::SupportPer::Seconds,
            },
            max_level: self.max_level,
            one_pass: self.one_pass,
            bounds: !self.no_bounds,
            max_candidates: self.max_candidates,
            time_budget_s: self.time_budget_s,
            memory_budget: self.memory_budget,
            device: self.device.device.into(),
            gpus: self.device.gpus.clone(),
            exact_kernel: self.exact_kernel.into(),
            calibration: self.calibration.clone(),
            significance: None,
        }
    }

    /// The miner configuration and GPU settings these flags describe, checked (a
    /// `--calibration` file is read here, once).
    ///
    /// # Errors
    /// Every invalid flag, each named as on the command line (`--max-level`, …).
    pub fn resolve(&self) -> Result<(MiningOptions, MinerConfig, GpuSettings)> {
        let options = self.options();
        let (config, gpu) = options.resolve().map_err(|errors| {
            let lines: Vec<String> = errors
                .iter()
                .map(|e| {
                    let field = e.field.split('[').next().unwrap_or(&e.field);
                    let flag = match field {
                        "intervals_s" | "intervals_samples" => "intervals".to_owned(),
                        f => f.replace('_', "-"),
                    };
                    if e.message.contains("`--") {
                        e.message.clone()
                    } else {
                        format!("`--{flag}`: {}", e.message)
                    }
                })
                .collect();
            anyhow::anyhow!("{}", lines.join("\n"))
        })?;
        Ok((options, config, gpu))
    }
}

/// The surrogates a test is made against: `--surrogates`, `--n-surrogates` and
/// `--sample-split`, the flags every command that tests significance takes, benchmarks
/// included (`synfire::significance`; `docs/significance.md`). Declared here once;
/// [`SignificanceArgs`] adds the rest of the test.
///
/// As declared, a command tests only with `--surrogates` (the others require it) and tests
/// 200 surrogates. A benchmark always tests, so it flattens these flags with two variations
/// applied by [`SurrogateArgs::bench_defaults`], through clap's `Command::mut_args` (which
/// changes the declared arguments in place, keeping their help text and order):
/// `--surrogates` defaults to `dither:0.015`, `--n-surrogates` to the benchmark's own
/// count, and nothing requires `--surrogates` any more.
#[derive(Debug, Clone, Args)]
pub struct SurrogateArgs {
    /// Test the episodes against surrogates: `METHOD[:Δ[:d]]`, METHOD one of `dither`,
    /// `dither-dead-time`, `shift`, `isi-dither`, `joint-isi-dither`, `trial-shift` (`mine`
    /// only: it needs `--trials`); Δ the displacement in seconds (default 0.015), d the dead
    /// time in seconds for the dead-time and ISI methods (default 0.002), e.g.
    /// `dither:0.015`, `shift:2.0`.
    #[arg(long, value_name = "METHOD[:Δ[:d]]")]
    pub surrogates: Option<String>,
    /// Number of surrogates S (`max-t` mines each one as the recording; `spectrum` searches
    /// each for its largest count per episode size).
    #[arg(long, default_value_t = DEFAULT_N_SURROGATES, requires = "surrogates")]
    pub n_surrogates: usize,
    /// `max-t` by sample splitting: select the tested family on this leading fraction of the
    /// recording (e.g. 0.5: the first half), ranked against 10 surrogates of that part, and
    /// test it on the rest against surrogates that are counted, not mined (minutes instead of
    /// hours at S = 1,000). `--test-top N` (`bench significance`: `--family N`) sets the
    /// family's size (default 10,000). Each tested episode's `test_count` is its count in the
    /// test part. `docs/significance.md`.
    #[arg(long, value_name = "FRACTION", requires = "surrogates")]
    pub sample_split: Option<f64>,
}

impl SurrogateArgs {
    /// The benchmarks' variation of these flags (and of `--significant-only`,
    /// [`SignificantOnlyArg`]), for `#[command(mut_args(SurrogateArgs::bench_defaults(N)))]`
    /// on a benchmark's options: `--surrogates` defaults to `dither:0.015`, `--n-surrogates`
    /// to `n_surrogates`, and no flag requires `--surrogates`. Other arguments pass
    /// unchanged.
    pub fn bench_defaults(n_surrogates: &'static str) -> impl FnMut(Arg) -> Arg {
        move |arg| match arg.get_id().as_str() {
            "surrogates" => arg.default_value(BENCH_SURROGATES),
            "n_surrogates" => arg.default_value(n_surrogates).requires(Resettable::Reset),
            "sample_split" | "significant_only" => arg.requires(Resettable::Reset),
            _ => arg,
        }
    }

    /// `--surrogates` parsed (`None` without it).
    ///
    /// # Errors
    /// A method that does not parse, named as `--surrogates`.
    pub fn method(&self) -> Result<Option<SurrogateMethod>> {
        self.surrogates
            .as_deref()
            .map(str::parse::<SurrogateMethod>)
            .transpose()
            .context("`--surrogates`")
    }

    /// `--surrogates` of a benchmark (always given, [`Self::bench_defaults`]): the text and
    /// the method.
    ///
    /// # Errors
    /// A method that does not parse, named as `--surrogates`.
    pub fn bench_method(&self) -> Result<(&str, SurrogateMethod)> {
        let text = self.surrogates.as_deref().unwrap_or(BENCH_SURROGATES);
        let method = text.parse().context("`--surrogates`")?;
        Ok((text, method))
    }
}

/// `--surrogates` of a benchmark when not given.
const BENCH_SURROGATES: &str = "dither:0.015";

/// `--significant-only`, declared here once for [`SignificanceArgs`] and `bench
/// significance` (which applies [`SurrogateArgs::bench_defaults`]: there it requires no
/// `--surrogates`).
#[derive(Debug, Clone, Args)]
pub struct SignificantOnlyArg {
    /// List only the significant episodes. With `--correction spectrum` this also saves most
    /// of the work: the surrogates' per-episode counts (for `surrogate_mean` and
    /// `surrogate_std`) are then made for the significant episodes only.
    #[arg(long, requires = "surrogates")]
    pub significant_only: bool,
}

/// Significance testing against surrogates: every flag of the test, declared here once and
/// flattened into each command that mines and tests (`mine`, `batch`). `mine` adds what
/// needs its own files (`--watch`, `--trials`) and `--closed`; the benchmarks take
/// [`SurrogateArgs`] and [`SignificantOnlyArg`] only, since their `--correction` and `--seed`
/// are other options.
///
/// The test reaches the library as [`SignificanceOptions`], built here and nowhere else
/// ([`Self::options`]): `mine` runs it ([`SignificanceOptions::test`]), `batch` checks it and
/// hands the Python side its serialised form.
#[derive(Debug, Clone, Args)]
pub struct SignificanceArgs {
    /// `--surrogates`, `--n-surrogates`, `--sample-split`.
    #[command(flatten)]
    pub surrogates: SurrogateArgs,
    /// Level α of the test.
    #[arg(long, default_value_t = DEFAULT_ALPHA, requires = "surrogates")]
    pub alpha: f64,
    /// Multiple-testing procedure: `guided` (significance-guided mining: level k+1 extends
    /// only the significant k-node episodes, each extension tested against surrogates of
    /// its added unit; family-wise, by sample splitting, `--sample-split` default 0.5;
    /// `--test-top` episodes per level, default 200), `max-t` (family-wise, over every
    /// episode of every level, the mining selection included; every surrogate is mined),
    /// `spectrum` (SPADE's pattern spectrum filtering),
    /// `fdr-bh`, `holm`, `bonferroni`, `none` (per-episode p-values of the `--watch` list, the
    /// `--test-top` most frequent, or every frequent episode).
    #[arg(long, default_value_t = DEFAULT_CORRECTION, value_parser = parse_correction, requires = "surrogates")]
    pub correction: Correction,
    /// Seed of the surrogates (the same seed gives the same surrogates and p-values, however
    /// the surrogates are split).
    #[arg(long, default_value_t = DEFAULT_SEED, requires = "surrogates")]
    pub seed: u64,
    /// Per-episode procedures: test only the N most frequent episodes (with
    /// `--sample-split`: the family's size).
    #[arg(long, value_name = "N", requires = "surrogates")]
    pub test_top: Option<usize>,
    /// `--significant-only`.
    #[command(flatten)]
    pub listing: SignificantOnlyArg,
}

impl SignificanceArgs {
    /// The test as the library's options (`None` without `--surrogates`), `--surrogates`
    /// parsed, the values unchecked (`SignificanceOptions::config` checks them; `mine`'s test
    /// does when it starts).
    ///
    /// # Errors
    /// A `--surrogates` method that does not parse ([`SurrogateArgs::method`]).
    pub fn options(&self) -> Result<Option<SignificanceOptions>> {
        Ok(self
            .surrogates
            .method()?
            .map(|method| self.options_with(method)))
    }

    /// The test as the library's options against `method` (a benchmark's
    /// [`SurrogateArgs::bench_method`]), the values unchecked.
    pub fn options_with(&self, method: SurrogateMethod) -> SignificanceOptions {
        SignificanceOptions {
            surrogates: method,
            n_surrogates: self.surrogates.n_surrogates,
            alpha: self.alpha,
            correction: self.correction,
            seed: self.seed,
            test_top: self.test_top,
            significant_only: self.listing.significant_only,
            sample_split: self.surrogates.sample_split,
        }
    }
}

/// A `--correction` value (`max-t`, `spectrum`, `guided`, …), as `Correction` parses it.
pub(crate) fn parse_correction(s: &str) -> Result<Correction, String> {
    s.parse()
}

/// `--exact-kernel`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ExactKernelArg {
    /// PTPE or MTPE by Eq. 3 (paper Algorithm 2).
    Hybrid,
    /// One thread per episode.
    Ptpe,
    /// Threads per (episode, segment), exact merge.
    Mtpe,
    /// From the occurrence ends of each candidate's prefix, built once per prefix (three or
    /// more nodes; pairs and PreElim as `hybrid`).
    Ends,
}

/// The library's kernel as the flag names it: the flag's default is the library's
/// ([`ExactAlgorithm::default`]).
impl From<ExactAlgorithm> for ExactKernelArg {
    fn from(k: ExactAlgorithm) -> Self {
        match k {
            ExactAlgorithm::Hybrid => Self::Hybrid,
            ExactAlgorithm::Ptpe => Self::Ptpe,
            ExactAlgorithm::Mtpe => Self::Mtpe,
            ExactAlgorithm::Ends => Self::Ends,
        }
    }
}

impl From<ExactKernelArg> for ExactAlgorithm {
    fn from(k: ExactKernelArg) -> Self {
        match k {
            ExactKernelArg::Hybrid => Self::Hybrid,
            ExactKernelArg::Ptpe => Self::Ptpe,
            ExactKernelArg::Mtpe => Self::Mtpe,
            ExactKernelArg::Ends => Self::Ends,
        }
    }
}

/// Unit of `--support`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SupportPer {
    /// Fraction of the number of events in the stream.
    Events,
    /// Occurrences per second of the stream's span.
    Seconds,
}

/// The library's unit as the flag names it: the flag's default is the library's
/// ([`synfire::episode::SupportPer::default`]).
impl From<synfire::episode::SupportPer> for SupportPer {
    fn from(per: synfire::episode::SupportPer) -> Self {
        match per {
            synfire::episode::SupportPer::Events => Self::Events,
            synfire::episode::SupportPer::Seconds => Self::Seconds,
        }
    }
}

/// `--workload` of `synfire bench episodes` and `synfire calibrate`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Workload {
    /// The paper's Sym26 stream.
    Sym26,
    /// The real A2929 session.
    A2929,
    /// The large 64-channel stream.
    Mea64,
    /// The dense, Neuropixels-like 300-unit, 120 s preset (`synfire::synth::dense`).
    Neuropixels,
    /// The real dense raster: IBL Neuropixels, 289 units, 120 s
    /// (`fixtures/spikes/ibl-ephys_test`).
    Ibl,
}

/// The bundled real dense raster (IBL Neuropixels, 289 units, 120 s).
pub const IBL_FIXTURE: &str = "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv";

impl Workload {
    /// The mining settings benchmarked on this workload.
    pub fn config(self) -> MinerConfig {
        match self {
            Self::Sym26 => sym26_config(),
            Self::A2929 | Self::Neuropixels | Self::Ibl => a2929_config(),
            Self::Mea64 => mea64_config(),
        }
    }

    /// The workload's stream and a name for tables: the synthetic ones from `seed`, the real
    /// A2929 session from `fixture`, the IBL raster from [`IBL_FIXTURE`].
    ///
    /// # Errors
    /// An unreadable fixture or bad generator parameters.
    pub fn stream(self, seed: u64, fixture: &Path) -> Result<(String, EventStream)> {
        Ok(match self {
            Self::Sym26 => (
                format!("Sym26 (seed {seed})"),
                synth::generate(&SynthParams::sym26(seed))?,
            ),
            Self::A2929 => (
                fixture.display().to_string(),
                ingest::read_spikes(fixture, Ordering::RequireSorted)?,
            ),
            Self::Mea64 => (
                format!("MEA64 (seed {seed})"),
                synth::generate(&SynthParams::mea64(seed))?,
            ),
            Self::Neuropixels => (
                format!("Neuropixels-like dense preset (seed {seed})"),
                synth::dense::generate_dense(&synth::dense::DenseParams::neuropixels(seed))?.0,
            ),
            Self::Ibl => (
                IBL_FIXTURE.to_owned(),
                ingest::read_spikes(Path::new(IBL_FIXTURE), Ordering::RequireSorted)?,
            ),
        })
    }
}

/// The Sym26 benchmark settings: four 2 ms-wide intervals (two of them hold the embedded
/// chains' delays) and a minimum count of 400, which keeps all 26 types frequent at level 1
/// (26 × 26 × 4 = 2,704 level-2 candidates) and recovers the short chain `A→B→C→D` and six
/// nodes of the long one.
fn sym26_config() -> MinerConfig {
    let intervals = Interval::parse_list(synfire::episode::calibrate::SYM26_INTERVALS)
        .expect("valid built-in intervals");
    MinerConfig::new(intervals, Threshold::MinCount(400))
}

/// The settings of the README's main job on the A2929 session: synaptic-scale delays
/// (0–5, 5–10, 10–20 ms), 0.2 occurrences per second, episodes of up to 4 neurons.
fn a2929_config() -> MinerConfig {
    let intervals = Interval::parse_list("0.000-0.005,0.005-0.010,0.010-0.020")
        .expect("valid built-in intervals");
    let mut config = MinerConfig::new(intervals, Threshold::PerSecond(0.2));
    config.max_level = 4;
    config
}

/// The large-workload settings: four 2 ms intervals and a minimum count of 1,350, which keeps
/// 1,744 of the 16,384 level-2 candidates (chance pairs among the fast chain neurons included)
/// and so gives 148,503 level-3 candidates (seed 1).
fn mea64_config() -> MinerConfig {
    let intervals = Interval::parse_list("0.001-0.003,0.004-0.006,0.009-0.011,0.014-0.016")
        .expect("valid built-in intervals");
    let mut config = MinerConfig::new(intervals, Threshold::MinCount(MEA64_MIN_COUNT));
    config.max_level = 3;
    config
}

/// Minimum count of the `mea64` workload.
const MEA64_MIN_COUNT: u64 = 1350;

/// The labelled series of a collection file (`synfire shapelet`'s training and test files,
/// `synfire bench shapelet`'s splits): the univariate series and their labels.
///
/// # Errors
/// Unreadable file, no labels, or multivariate series (each error names the file).
pub fn read_labelled(path: &Path) -> Result<(Vec<Vec<f64>>, Vec<String>)> {
    let name = path.display().to_string();
    let d = read_dataset(path).with_context(|| format!("reading `{name}`"))?;
    let labels = d
        .labels
        .clone()
        .ok_or_else(|| synfire::shapelet::ShapeletError::Unlabelled {
            input: name.clone(),
        })?;
    Ok((univariate(&d, &name)?, labels))
}

/// The synthetic session of `synfire generate session` and `synfire bench session`: a
/// Neuropixels-like recording with planted chains and, if asked, the co-modulated nulls
/// (`synfire::synth::DenseParams::session` and `synfire::synth::modulation`). Each flag left
/// out keeps the preset's value, given in its help.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Number of units (default 1,000).
    #[arg(long, value_name = "N")]
    pub units: Option<usize>,
    /// Length of the session, seconds (default 3,600).
    #[arg(long, value_name = "SECONDS")]
    pub seconds: Option<f64>,
    /// Median of the units' log-normal firing rates, Hz (default 4).
    #[arg(long, value_name = "HZ")]
    pub rate_median_hz: Option<f64>,
    /// Standard deviation of the natural log of the rates, dimensionless (default 1).
    #[arg(long, value_name = "SIGMA")]
    pub rate_sigma: Option<f64>,
    /// Highest firing rate, Hz: faster draws are clamped to it (the lowest is 0.1 Hz; default
    /// 60).
    #[arg(long, value_name = "HZ")]
    pub max_rate_hz: Option<f64>,
    /// Number of planted chains, spread evenly over the units (default 6).
    #[arg(long, value_name = "N")]
    pub chains: Option<usize>,
    /// Units per chain: `N`, or `LOW-HIGH` for chains of LOW, LOW+1, …, HIGH units in turn
    /// (default 3-4).
    #[arg(long, value_name = "N|LOW-HIGH")]
    pub chain_length: Option<String>,
    /// Delay windows between consecutive units of a chain, seconds, comma-separated
    /// `LOW-HIGH` (a delay uniform in (LOW, HIGH]), used by the chains in turn (default
    /// 0.001-0.004,0.006-0.009,0.012-0.018: inside the intervals 0–5, 5–10 and 10–20 ms).
    #[arg(long, value_name = "LOW-HIGH,...")]
    pub chain_lags_s: Option<String>,
    /// Activations of each chain per second (a Poisson process), Hz; each activation fires
    /// every unit of the chain in order (default 1).
    #[arg(long, value_name = "HZ")]
    pub chain_rate_hz: Option<f64>,
    /// A slow rate modulation shared by every unit (the co-modulated nulls; default `none`).
    #[arg(long, value_enum, value_name = "KIND")]
    pub comodulation: Option<ComodulationArg>,
    /// Standard deviation of the shared log-rate fluctuation of `ou`, `sinusoids` and
    /// `ou-up-down`, dimensionless (default 0.5: the rate doubles or halves at ±1.4 SD).
    #[arg(long, value_name = "SD")]
    pub comodulation_sd: Option<f64>,
    /// Shape of the gamma-distributed excess of every inter-spike interval over the 2 ms dead
    /// time, dimensionless: 1 is Poisson with dead time, below 1 bursty, above 1 regular
    /// (default 1).
    #[arg(long, value_name = "K")]
    pub isi_shape: Option<f64>,
}

/// `--comodulation` of [`SessionArgs`].
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ComodulationArg {
    /// Independent units.
    None,
    /// A log-rate Ornstein–Uhlenbeck process shared by all units (τ = 0.1 s: 1.6 Hz corner).
    Ou,
    /// A log-rate sum of eight sinusoids at 0.5–4 Hz shared by all units.
    Sinusoids,
    /// Up and down states shared by all units (mean up 300 ms, down 200 ms, down-state rate
    /// × 0.1).
    UpDown,
    /// `ou` and `up-down` together.
    OuUpDown,
}

impl SessionArgs {
    /// Whether any flag was given (a preset other than `session` takes none).
    pub fn any_given(&self) -> bool {
        let Self {
            units,
            seconds,
            rate_median_hz,
            rate_sigma,
            max_rate_hz,
            chains,
            chain_length,
            chain_lags_s,
            chain_rate_hz,
            comodulation,
            comodulation_sd,
            isi_shape,
        } = self;
        units.is_some()
            || seconds.is_some()
            || rate_median_hz.is_some()
            || rate_sigma.is_some()
            || max_rate_hz.is_some()
            || chains.is_some()
            || chain_length.is_some()
            || chain_lags_s.is_some()
            || chain_rate_hz.is_some()
            || comodulation.is_some()
            || comodulation_sd.is_some()
            || isi_shape.is_some()
    }

    /// The generator's parameters: [`synth::DenseParams::session`] with `seed` and the flags
    /// given.
    ///
    /// # Errors
    /// A flag that does not parse or chains that do not fit the units, each named as on the
    /// command line. (Out-of-range values are named by the generator.)
    pub fn params(&self, seed: u64) -> Result<synth::DenseParams> {
        let mut p = synth::DenseParams::session(seed);
        if let Some(n) = self.units {
            p.units = n;
        }
        if let Some(s) = self.seconds {
            p.duration_s = s;
        }
        if let Some(r) = self.rate_median_hz {
            p.rate_median_hz = r;
        }
        if let Some(s) = self.rate_sigma {
            p.rate_sigma = s;
        }
        if let Some(hi) = self.max_rate_hz {
            p.rate_range_hz.1 = hi;
        }
        if let Some(r) = self.chain_rate_hz {
            p.chain_activation_hz = r;
        }
        if let Some(k) = self.isi_shape {
            p.isi_shape = k;
        }
        let lengths = match self.chain_length.as_deref() {
            None => (3, 4),
            Some(text) => parse_length(text)
                .with_context(|| format!("`--chain-length {text}`: expected N or LOW-HIGH"))?,
        };
        let windows = match self.chain_lags_s.as_deref() {
            None => synth::dense::SESSION_WINDOWS_S.to_vec(),
            Some(text) => parse_windows(text).with_context(|| {
                format!("`--chain-lags-s {text}`: expected LOW-HIGH,… in seconds")
            })?,
        };
        p.chains = synth::planted_chains(p.units, self.chains.unwrap_or(6), lengths, &windows)
            .context("`--chains`, `--chain-length` and `--units`")?;
        let sd = self.comodulation_sd.unwrap_or(0.5);
        let ou = synth::Comodulation::OrnsteinUhlenbeck { sd, tau_s: 0.1 };
        let (comodulation, up_down) = match self.comodulation.unwrap_or(ComodulationArg::None) {
            ComodulationArg::None => (None, None),
            ComodulationArg::Ou => (Some(ou), None),
            ComodulationArg::Sinusoids => (
                Some(synth::Comodulation::Sinusoids {
                    sd,
                    band_hz: (0.5, 4.0),
                    components: 8,
                }),
                None,
            ),
            ComodulationArg::UpDown => (None, Some(synth::UpDownStates::slow_wave())),
            ComodulationArg::OuUpDown => (Some(ou), Some(synth::UpDownStates::slow_wave())),
        };
        p.comodulation = comodulation;
        p.up_down = up_down;
        Ok(p)
    }
}

fn parse_length(text: &str) -> Result<(usize, usize)> {
    Ok(match text.split_once('-') {
        Some((a, b)) => (a.trim().parse()?, b.trim().parse()?),
        None => {
            let n = text.trim().parse()?;
            (n, n)
        }
    })
}

fn parse_windows(text: &str) -> Result<Vec<(f64, f64)>> {
    text.split(',')
        .map(|part| {
            let (a, b) = part
                .split_once('-')
                .with_context(|| format!("`{part}` has no `-`"))?;
            let (lo, hi): (f64, f64) = (a.trim().parse()?, b.trim().parse()?);
            if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo < hi) {
                anyhow::bail!("`{part}` must satisfy 0 ≤ LOW < HIGH");
            }
            Ok((lo, hi))
        })
        .collect()
}
