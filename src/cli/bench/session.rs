//! `synfire bench session`: the scale of issue 45, a 1,000-unit, one-hour Neuropixels-like
//! session with planted chains, generated in memory and mined and tested as `synfire mine`
//! does (`synfire::significance::MineJob`), one table row: the session's
//! size, the procedure, wall seconds, peak resident memory, and how many planted chains were
//! found whole and how many significant episodes hold a unit of no chain.

use std::collections::HashSet;
use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Arg, Args};
use synfire::device::DeviceChoice;
use synfire::episode::{GpuSettings, MinerConfig, MiningResult, NoProgress};
use synfire::event::{EventStream, EventType};
use synfire::significance::{
    MineJob, SignificanceConfig, SignificanceResult, check_sample_split, listing,
};
use synfire::synth::{self, DenseParams};

use crate::cli::args::{MiningArgs, OutputArg, SessionArgs, SignificanceArgs, SurrogateArgs};

/// Options of `synfire bench session`: the session ([`SessionArgs`], seeded by
/// `--session-seed`), the mining flags of `synfire mine` ([`MiningArgs`]) with the issue's
/// settings as defaults (`--intervals 0-0.005,0.005-0.010,0.010-0.020 --support 0.2
/// --support-per seconds --max-level 4`), and its significance flags ([`SignificanceArgs`])
/// with the benchmarks' variation ([`SurrogateArgs::bench_defaults`]: `dither:0.015`, 1,000
/// surrogates), so the procedure is `synfire mine`'s default unless `--correction` names one.
#[derive(Debug, Args)]
#[command(mut_args(session_defaults))]
pub struct BenchSessionArgs {
    #[command(flatten)]
    session: SessionArgs,
    /// Seed of the session's generator (`--seed` seeds the surrogates).
    #[arg(long, default_value_t = 1)]
    session_seed: u64,
    #[command(flatten)]
    mining: MiningArgs,
    #[command(flatten)]
    significance: SignificanceArgs,
    /// Instead of the whole session, time the live episodes stage (`synfire run`'s
    /// `[stages.<name>] kind = "episodes"` with these mining and significance options) on
    /// this many sliding windows of the session, one after another (faster than real time
    /// when a window takes less than the hop): the first window's compute seconds apart (a
    /// stage's first window does its warm-up; with `guided` it selects its family in the
    /// foreground), then the later windows' (p50, p99, max) against the hop, the real-time
    /// budget.
    #[arg(long, value_name = "N")]
    live_windows: Option<usize>,
    /// Window length for `--live-windows`, seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60.0,
        requires = "live_windows"
    )]
    window_s: f64,
    /// Hop between windows for `--live-windows`, seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        requires = "live_windows"
    )]
    hop_s: f64,
    #[command(flatten)]
    output: OutputArg,
}

/// The benchmark's defaults on the flattened flags (see [`BenchSessionArgs`]).
fn session_defaults(arg: Arg) -> Arg {
    let arg = SurrogateArgs::bench_defaults("1000")(arg);
    match arg.get_id().as_str() {
        "intervals" => arg
            .default_value("0-0.005,0.005-0.010,0.010-0.020")
            .required(false),
        "support" => arg.default_value("0.2"),
        "support_per" => arg.default_value("seconds"),
        "max_level" => arg.default_value("4"),
        "alpha" | "correction" | "seed" | "test_top" => {
            arg.requires(clap::builder::Resettable::Reset)
        }
        _ => arg,
    }
}

/// Mines `stream` for the test `sig` and tests the result, as `synfire mine` does: through
/// the library's one job ([`MineJob`]: the counter chosen for `device`, the procedure's own
/// mining configuration, then the test on the same device, its warnings logged and its
/// episodes listed in the result); a truncated run is refused, since it would not benchmark
/// the whole procedure. Returns the mining result and the test.
fn mine_and_test(
    stream: &EventStream,
    config: &MinerConfig,
    sig: &SignificanceConfig,
    device: DeviceChoice,
    settings: &GpuSettings,
) -> Result<(MiningResult, SignificanceResult)> {
    let job = MineJob::resolved(
        stream,
        device,
        config.clone(),
        settings.clone(),
        Some(sig.clone()),
    )
    .context("`--device gpu`")?;
    let mut result = job.mine(&NoProgress)?;
    if let Some(t) = &result.truncated {
        anyhow::bail!(
            "mining was truncated ({t}); raise `--support` or the budgets to benchmark a whole run"
        );
    }
    let r = job
        .test(&mut result)?
        .context("the job was given a test, so it returns one")?;
    Ok((result, r))
}

/// The row's verdict on the planted chains.
#[derive(Debug, PartialEq, Eq)]
struct ChainVerdict {
    /// Chains whose whole episode (every unit, in order, each interval holding the chain's
    /// delay window) was tested significant.
    found_whole: usize,
    /// Significant episodes with a unit that belongs to no chain.
    false_looking: usize,
}

/// Compares `r`'s significant episodes with the chains of `params` (stream types are the
/// units: `u{i}` is type `i`).
fn verdict(params: &DenseParams, r: &SignificanceResult) -> ChainVerdict {
    let significant: Vec<_> = r
        .tests
        .iter()
        .filter(|t| t.stats.significant)
        .map(|t| &t.episode)
        .collect();
    let found_whole = params
        .chains
        .iter()
        .filter(|chain| {
            let types: Vec<EventType> =
                chain.neurons.iter().map(|&n| EventType(n as u32)).collect();
            let (lo, hi) = chain.delay_s;
            significant.iter().any(|e| {
                e.types() == types.as_slice()
                    && e.intervals()
                        .iter()
                        .all(|iv| iv.low() <= lo && hi <= iv.high())
            })
        })
        .count();
    let planted: HashSet<EventType> = params
        .chains
        .iter()
        .flat_map(|c| c.neurons.iter().map(|&n| EventType(n as u32)))
        .collect();
    let false_looking = significant
        .iter()
        .filter(|e| e.types().iter().any(|t| !planted.contains(t)))
        .count();
    ChainVerdict {
        found_whole,
        false_looking,
    }
}

/// The process's peak resident memory (`VmHWM` of `/proc/self/status`), bytes; `None` where
/// the file or the line is missing (not Linux).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Runs the benchmark.
///
/// # Errors
/// Bad options (named), the generator's refusal, mining, device or surrogate errors.
pub fn run(args: &BenchSessionArgs) -> Result<()> {
    let params = args
        .session
        .params(args.session_seed)
        .context("the session's options")?;
    // `--support` has a default here; `--min-count` (which clap keeps from an explicit
    // `--support`) replaces it.
    let mut mining = args.mining.clone();
    if mining.min_count.is_some() {
        mining.support = None;
    }
    let (options, config, settings) = mining.resolve()?;
    let (surrogates, method) = args.significance.surrogates.bench_method()?;
    if let Some(f) = args.significance.surrogates.sample_split
        && let Some(e) = check_sample_split(f, Some(args.significance.correction), Some(&method))
            .into_iter()
            .next()
    {
        anyhow::bail!("`--sample-split {f}`: {e}");
    }
    let sig = args.significance.options_with(method).test(None, None);
    let mut out = args.output.line_writer()?;
    let started = Instant::now();
    let (stream, _) = synth::generate_dense(&params).context("generating the session")?;
    let generate_s = started.elapsed().as_secs_f64();
    writeln!(
        out,
        "synfire bench session: {} chains at {} Hz, co-modulation {}, ISI shape {}, session seed {}; {} surrogates ({surrogates}), α {}, device {}, CPU on {} threads; generated in {generate_s:.1} s",
        params.chains.len(),
        params.chain_activation_hz,
        comodulation_name(&params),
        params.isi_shape,
        params.seed,
        sig.n_surrogates,
        sig.alpha,
        match options.device {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Gpu => "gpu",
        },
        rayon::current_num_threads(),
    )?;
    writeln!(out)?;
    if let Some(n) = args.live_windows {
        return live_windows(
            &mut out,
            &stream,
            (n, args.window_s, args.hop_s),
            &config,
            &sig,
            (options.device, &settings),
        );
    }
    writeln!(
        out,
        "| units | seconds | spikes | procedure | S | wall s | peak RSS MiB | listed | significant | chains found whole | false-looking |"
    )?;
    writeln!(
        out,
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    let started = Instant::now();
    let (result, r) = mine_and_test(&stream, &config, &sig, options.device, &settings)?;
    let wall_s = started.elapsed().as_secs_f64();
    let listed = listing(&result, Some(&r), sig.significant_only, false)
        .keep
        .iter()
        .zip(&result.episodes)
        .filter(|(keep, f)| **keep && f.episode.len() >= 2)
        .count();
    let significant = r.tests.iter().filter(|t| t.stats.significant).count();
    let v = verdict(&params, &r);
    let rss = peak_rss_bytes().map_or_else(
        || "n/a".to_owned(),
        |b| format!("{:.0}", b as f64 / 1048576.0),
    );
    writeln!(
        out,
        "| {} | {} | {} | {} | {} | {wall_s:.2} | {rss} | {listed} | {significant} | {}/{} | {} |",
        params.units,
        params.duration_s,
        stream.len(),
        sig.correction,
        sig.n_surrogates,
        v.found_whole,
        params.chains.len(),
        v.false_looking
    )?;
    out.flush()?;
    Ok(())
}

/// `--live-windows`: `n` windows of `window_s` every `hop_s` seconds from the session's
/// start, each processed by an episodes stage as `synfire run` builds it (mining `config`,
/// testing with `sig`, on `device`), one after another; prints one row with the first
/// window's compute seconds, the later windows' (p50, p99, max; the first's alone when
/// `n = 1`), the hop, and whether that p99 stays within it (real time).
fn live_windows(
    out: &mut impl Write,
    stream: &EventStream,
    (n, window_s, hop_s): (usize, f64, f64),
    config: &MinerConfig,
    sig: &SignificanceConfig,
    (device, settings): (DeviceChoice, &GpuSettings),
) -> Result<()> {
    use std::sync::Arc;
    use synfire::live::stage::Stage;
    use synfire::live::stage::episodes::EpisodeStage;
    use synfire::live::window::{Window, WindowData};

    anyhow::ensure!(
        window_s > 0.0 && hop_s > 0.0 && window_s.is_finite() && hop_s.is_finite(),
        "`--window-s {window_s}` and `--hop-s {hop_s}` must be positive seconds"
    );
    anyhow::ensure!(n > 0, "`--live-windows 0`: no window to time");
    let last_end = (n - 1) as f64 * hop_s + window_s;
    anyhow::ensure!(
        last_end <= stream.end(),
        "`--live-windows {n}` windows of {window_s} s every {hop_s} s end at {last_end} s, after the session's end ({} s): fewer windows or a longer `--seconds`",
        stream.end()
    );
    let mut stage = EpisodeStage::new(config.clone(), device, settings.clone())
        .context("the episodes stage")?
        .with_significance(sig.clone());
    let names: Arc<[Arc<str>]> = stream
        .alphabet()
        .labels()
        .iter()
        .map(|l| Arc::from(l.as_str()))
        .collect();
    let (times, types) = (stream.times(), stream.types());
    let mut seconds = Vec::with_capacity(n);
    let (mut tested, mut significant, mut spikes) = (0usize, 0usize, 0usize);
    for k in 0..n {
        let (start_s, end_s) = (k as f64 * hop_s, k as f64 * hop_s + window_s);
        let lo = times.partition_point(|&t| t < start_s);
        let hi = times.partition_point(|&t| t < end_s);
        spikes += hi - lo;
        let window = Window {
            window: Arc::from("bench"),
            source: Arc::from("session"),
            index: k as u64,
            start_s,
            end_s,
            complete: true,
            preview: false,
            late: 0,
            dropped: 0,
            out_of_range: 0,
            duplicate: 0,
            overflow: 0,
            gap: None,
            epoch: 0,
            run_id: Arc::from(""),
            closed_at: Instant::now(),
            data: WindowData::Spikes {
                times: times[lo..hi].to_vec(),
                units: types[lo..hi].iter().map(|t| t.0).collect(),
                names: names.clone(),
            },
        };
        let started = Instant::now();
        let result = stage
            .process(&window)
            .with_context(|| format!("window {k} ({start_s}–{end_s} s)"))?;
        seconds.push(started.elapsed().as_secs_f64());
        if let Some(s) = &result.significance {
            tested += s.tested;
            significant += s.significant;
        }
    }
    let first = seconds[0];
    let mut sorted = if n > 1 {
        seconds[1..].to_vec()
    } else {
        seconds.clone()
    };
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len();
    let q = |p: f64| sorted[((p * (m - 1) as f64).round() as usize).min(m - 1)];
    let (p50, p99, max) = (q(0.5), q(0.99), sorted[m - 1]);
    writeln!(
        out,
        "| units | window s | hop s | windows | spikes a window | procedure | S | first s | p50 s | p99 s | max s | real time (p99 ≤ hop) | tested a window | significant a window | peak RSS MiB |"
    )?;
    writeln!(
        out,
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"
    )?;
    let rss = peak_rss_bytes().map_or_else(
        || "n/a".to_owned(),
        |b| format!("{:.0}", b as f64 / 1048576.0),
    );
    writeln!(
        out,
        "| {} | {window_s} | {hop_s} | {n} | {:.0} | {} | {} | {first:.3} | {p50:.3} | {p99:.3} | {max:.3} | {} | {:.1} | {:.1} | {rss} |",
        stream.alphabet().len(),
        spikes as f64 / n as f64,
        sig.correction,
        sig.n_surrogates,
        if p99 <= hop_s { "yes" } else { "no" },
        tested as f64 / n as f64,
        significant as f64 / n as f64,
    )?;
    out.flush()?;
    Ok(())
}

fn comodulation_name(p: &DenseParams) -> String {
    let mut parts = Vec::new();
    match &p.comodulation {
        None => {}
        Some(synth::Comodulation::OrnsteinUhlenbeck { sd, tau_s }) => {
            parts.push(format!("OU (sd {sd}, τ {tau_s} s)"));
        }
        Some(synth::Comodulation::Sinusoids { sd, band_hz, .. }) => {
            parts.push(format!(
                "sinusoids (sd {sd}, {}–{} Hz)",
                band_hz.0, band_hz.1
            ));
        }
    }
    if let Some(ud) = &p.up_down {
        parts.push(format!(
            "up/down (up {} s, down {} s, × {})",
            ud.mean_up_s, ud.mean_down_s, ud.down_gain
        ));
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(" and ")
    }
}
