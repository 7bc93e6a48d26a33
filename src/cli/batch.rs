//! `synfire batch`: every session of a sessions file mined on a Ray cluster, through the
//! Python package's `synfire.cluster` (issue 22; `docs/cluster.md`).
//!
//! The binary checks everything it can before any work: the mining and significance options
//! (the same flags, names and defaults as `synfire mine`, each bad one named), the sessions
//! file, and that the Python interpreter (`--python`, else `$SYNFIRE_PYTHON`, else
//! `python3`) has the `synfire` package with `synfire.cluster` and Ray, naming what is
//! missing and how to install it. Then it runs `PYTHON -m synfire.cluster batch` with the
//! options as JSON (exactly what `synfire.mine` passes the extension) and returns its exit
//! status. The cluster layer lives in Python because Ray's scheduling, actors and retries are
//! Python APIs (`docs/adr/0004-cluster-engine.md`); the binary stays apart from the library
//! and links no Python.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use clap::Args;
use synfire::significance::MineOptions;

use crate::cli::args::{MiningArgs, ReaderArgs, SignificanceArgs};

/// The Ray the Python side is written against.
const RAY_REQUIREMENT: &str = "ray>=2.9,<3";
/// The Python package's distribution name on the package index (`pyproject.toml`; ADR 0005):
/// `synfire` there is another project's, which also installs an import package `synfire`.
const DISTRIBUTION: &str = "synfire-mining";

/// Options of `synfire batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The sessions: a text file with one path or URI per line (NWB file, phy/Kilosort
    /// folder, CSV, Open Ephys recording; `s3://…` through fsspec on the workers); `#` lines
    /// and blank lines are skipped; `NAME<TAB>PATH` names a session (default: the file or
    /// folder name without extension).
    sessions: PathBuf,
    #[command(flatten)]
    mining: MiningArgs,
    /// The significance test of every session, as `synfire mine`'s (no `trial-shift`, which
    /// needs trials).
    #[command(flatten)]
    significance: SignificanceArgs,
    /// Split each session's surrogates into batches of N across every worker (sessions then
    /// run one after another); default: one task per session, as always with
    /// `--sample-split`.
    #[arg(
        long,
        value_name = "N",
        requires = "surrogates",
        conflicts_with = "sample_split"
    )]
    surrogate_batch: Option<usize>,
    /// How each session is read (as `synfire mine`).
    #[command(flatten)]
    reader: ReaderArgs,
    /// The Ray cluster: `auto` (`$RAY_ADDRESS`, else a cluster already running on this node
    /// such as `ray start --head` on a Slurm allocation, else a new local one), `local` (a
    /// new one on this machine), or an address (`10.0.0.1:6379`, `ray://head:10001`).
    #[arg(long, default_value = "auto", value_name = "auto|local|ADDRESS")]
    cluster: String,
    /// Workers (Ray actors, each holding a warm engine): default one per GPU of the cluster,
    /// else one per CPU.
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Ray CPUs per worker (may be fractional); default: the free CPUs divided among them.
    #[arg(long, value_name = "CPUS")]
    cpus_per_worker: Option<f64>,
    /// Times a session is retried after its worker process died (a session's own errors are
    /// not retried).
    #[arg(long, default_value_t = 3)]
    retries: u32,
    /// Where each session's results go (`NAME.synfire.nwb`, `NAME.synfire.json`) with
    /// `episodes.csv` (every session's episodes, a `session` column first) and
    /// `sessions.csv` (one row per session, failures with their error).
    #[arg(long, default_value = "synfire-batch", value_name = "DIR")]
    output_dir: PathBuf,
    /// Which per-session results to write: `nwb` (the NWB results of `synfire mine
    /// --nwb-output`, with every listed episode's occurrences: the slow part of a dense
    /// session), `json` (`synfire mine --format json`), or both.
    #[arg(long, value_delimiter = ',', default_value = "nwb,json", value_parser = ["nwb", "json"])]
    outputs: Vec<String>,
    /// No `episodes.csv`: each session's episodes stay in its own files, and the Python
    /// process receives only each session's summary (for collections whose episodes do not
    /// fit one process's memory).
    #[arg(long)]
    no_combine: bool,
    /// Give up after this many seconds (the sessions not finished are reported).
    #[arg(long, value_name = "SECONDS")]
    timeout_s: Option<f64>,
    /// The Python interpreter with `synfire` and Ray (default: `$SYNFIRE_PYTHON`, else
    /// `python3`).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// Checks that `python` can import `synfire`, `synfire.cluster` and `ray`; prints the
/// missing ones, space-separated. A `synfire` without the extension `synfire._synfire` is
/// another project's package of that import name (ADR 0005) and reported as `synfire._synfire`.
const PROBE: &str = "import importlib.util as u
missing = [m for m in ('synfire', 'ray') if u.find_spec(m) is None]
if 'synfire' not in missing:
    try:
        ours = u.find_spec('synfire._synfire') is not None
    except Exception:
        ours = False
    if not ours:
        missing.append('synfire._synfire')
    elif u.find_spec('synfire.cluster') is None:
        missing.append('synfire.cluster')
print(' '.join(missing))";

/// Runs `synfire batch`.
///
/// # Errors
/// A bad option or sessions file (named), a Python without the package or Ray (named, with
/// how to install it), or a batch in which some session failed (each listed by the Python
/// side) or that could not run.
pub fn run(args: &BatchArgs) -> Result<()> {
    let (options_json, reader_json) = args.checked_options()?;
    let sessions = count_sessions(&args.sessions)?;
    let python = args.python.clone().unwrap_or_else(|| {
        std::env::var_os("SYNFIRE_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
    });
    check_python(&python)?;
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "synfire.cluster", "batch"])
        .arg(&args.sessions)
        .arg("--options-json")
        .arg(&options_json)
        .arg("--reader-json")
        .arg(&reader_json)
        .args(["--cluster", &args.cluster])
        .arg("--output-dir")
        .arg(&args.output_dir)
        .args(["--retries", &args.retries.to_string()])
        .args(["--outputs", &args.outputs.join(",")]);
    if let Some(n) = args.workers {
        cmd.args(["--workers", &n.to_string()]);
    }
    if let Some(c) = args.cpus_per_worker {
        cmd.args(["--cpus-per-worker", &c.to_string()]);
    }
    if let Some(n) = args.surrogate_batch {
        cmd.args(["--surrogate-batch", &n.to_string()]);
    }
    if let Some(t) = args.timeout_s {
        cmd.args(["--timeout-s", &t.to_string()]);
    }
    if args.quiet {
        cmd.arg("--quiet");
    }
    if args.no_combine {
        cmd.arg("--no-combine");
    }
    tracing::info!(
        sessions,
        cluster = %args.cluster,
        python = %python.display(),
        "Mining the sessions on the cluster (python -m synfire.cluster batch)."
    );
    let status = cmd
        .status()
        .with_context(|| format!("running `{} -m synfire.cluster batch`", python.display()))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(1) => anyhow::bail!(
            "some sessions failed (listed above); the others' results are in {}",
            args.output_dir.display()
        ),
        Some(code) => anyhow::bail!(
            "`{} -m synfire.cluster batch` exited with status {code}",
            python.display()
        ),
        None => anyhow::bail!(
            "`{} -m synfire.cluster batch` was stopped by a signal",
            python.display()
        ),
    }
}

impl BatchArgs {
    /// The mining options (with the significance test, [`MineOptions`]) and the reader
    /// options as JSON, serialised from the types `synfire.mine` fills in the extension, every
    /// option checked first.
    fn checked_options(&self) -> Result<(String, String)> {
        let (options, _, _) = self.mining.resolve()?;
        let significance = self.significance.options()?;
        if let Some(o) = &significance {
            o.config().map_err(|errors| {
                let lines: Vec<String> = errors
                    .iter()
                    .map(|e| {
                        if e.field == "surrogates" && e.message.contains("trials") {
                            "`--surrogates`: `trial-shift` needs trials, which `synfire batch` does not take".to_owned()
                        } else {
                            format!("`--{}`: {}", e.field.replace('_', "-"), e.message)
                        }
                    })
                    .collect();
                anyhow::anyhow!("{}", lines.join("\n"))
            })?;
        }
        if self.surrogate_batch == Some(0) {
            anyhow::bail!("`--surrogate-batch`: must be at least 1");
        }
        if self.workers == Some(0) {
            anyhow::bail!("`--workers`: must be at least 1");
        }
        if let Some(c) = self.cpus_per_worker
            && !(c.is_finite() && c > 0.0)
        {
            anyhow::bail!("`--cpus-per-worker`: must be a positive number, got {c}");
        }
        if let Some(t) = self.timeout_s
            && !(t.is_finite() && t > 0.0)
        {
            anyhow::bail!("`--timeout-s`: must be a positive number of seconds, got {t}");
        }
        if self.cluster.trim().is_empty() {
            anyhow::bail!("`--cluster`: give `auto`, `local` or an address");
        }
        let options: MineOptions = options.with_test(significance);
        let mining = serde_json::to_string(&options).context("the mining options as JSON")?;
        let reader = serde_json::to_value(&self.reader).context("the reader options as JSON")?;
        Ok((mining, reader.to_string()))
    }
}

/// The number of sessions the file lists.
///
/// # Errors
/// The file cannot be read, or lists none.
fn count_sessions(path: &Path) -> Result<usize> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the sessions file {}", path.display()))?;
    let n = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    if n == 0 {
        anyhow::bail!(
            "the sessions file {} lists no session (one path or URI per line)",
            path.display()
        );
    }
    Ok(n)
}

/// Checks that `python` runs and has `synfire` (with `synfire.cluster`) and Ray.
///
/// # Errors
/// Naming the interpreter and what it lacks, with the command that installs it.
fn check_python(python: &Path) -> Result<()> {
    let shown = python.display();
    let out = match Command::new(python).args(["-c", PROBE]).output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => anyhow::bail!(
            "the Python interpreter `{shown}` was not found: `synfire batch` runs the Python package's `synfire.cluster` on Ray; install Python 3.10 or newer with `pip install '{DISTRIBUTION}[cluster]'` (= {DISTRIBUTION} and '{RAY_REQUIREMENT}'), or name an interpreter that has them with `--python` (or `SYNFIRE_PYTHON`)"
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("running the Python interpreter `{shown}`"));
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        anyhow::bail!("`{shown}` cannot import the synfire package: {last}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = stdout.split_whitespace().collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines = Vec::new();
    for m in &missing {
        lines.push(match *m {
            "synfire" => format!(
                "the Python package `synfire` is not installed for `{shown}`: `{shown} -m pip install {DISTRIBUTION}` (from a clone: `pip install .`)"
            ),
            "synfire._synfire" => format!(
                "the `synfire` that `{shown}` imports is not this project's (no extension `synfire._synfire`): the distribution `synfire` on the package index is another project's; `{shown} -m pip uninstall synfire` then `{shown} -m pip install --force-reinstall {DISTRIBUTION}`"
            ),
            "synfire.cluster" => format!(
                "the `synfire` package of `{shown}` has no `synfire.cluster` (an older version): reinstall it from this version"
            ),
            "ray" => format!(
                "Ray is not installed for `{shown}`: `{shown} -m pip install '{RAY_REQUIREMENT}'`"
            ),
            other => format!("`{other}` is missing for `{shown}`"),
        });
    }
    anyhow::bail!("{}", lines.join("\n"))
}
