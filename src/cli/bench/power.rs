//! `synfire bench power`: where the power of a procedure (`max-t` by default, `guided` with
//! `--correction guided`) ends. A grid of firing rates × evoke
//! probabilities; in each cell, independent refractory trains from the dense generator (every
//! unit at the cell's rate, no bursts, no synchronous pairs) with one chain `u0 → u1 → u2`
//! embedded (each spike of a chain unit evokes the next one's 6–9 ms later with the cell's
//! probability), mined at 0–5 and 5–10 ms and tested with `max-t` against dithered surrogates.
//! The table gives the chain's first link `u0 -(5,10]ms-> u1`: its expected excess count
//! (`rate · duration · p`), the observed count and the surrogates' mean, and in how many seeds
//! it was significant; with `--max-level 3` the whole chain too. With `--sample-split F` the
//! test is `max-t` by sample splitting, and the table also gives the link's count in the test
//! part beside its surrogates' mean there. With `--correction guided` (which needs
//! `--max-level 3` or more to test the chain whole) the recording is mined to two nodes and
//! the guided search selects on its first half and tests on the second, as `synfire mine`
//! does; the link's count in the test part is given beside its surrogates' mean there.

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use synfire::episode::{Episode, Interval, MinerConfig, Threshold, TypeIndex, count_exact, mine};
use synfire::event::EventType;
use synfire::significance::{Correction, SignificanceConfig, test_episodes};
use synfire::synth::dense::{DenseParams, generate_dense};
use synfire::synth::sym26::Chain;

use crate::cli::args::{OutputArg, SurrogateArgs, parse_correction};

/// Options of `synfire bench power`: the surrogates are [`SurrogateArgs`] with the
/// benchmarks' defaults (`dither:0.015`, 99 surrogates; [`SurrogateArgs::bench_defaults`]).
/// `--correction` (a list, as `bench significance`'s) is this benchmark's own.
#[derive(Debug, Args)]
#[command(mut_args(SurrogateArgs::bench_defaults("99")))]
pub struct PowerArgs {
    /// Firing rates of every unit, Hz, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1.0, 3.0, 10.0, 30.0])]
    rates_hz: Vec<f64>,
    /// Probabilities that a chain unit's spike evokes the next one's, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.05, 0.1, 0.2, 0.4])]
    evoke: Vec<f64>,
    /// Units (3 of them in the chain).
    #[arg(long, default_value_t = 30)]
    units: usize,
    /// Recording length, seconds.
    #[arg(long, default_value_t = 120.0)]
    duration_s: f64,
    /// Minimum count of the mining (the family `max-t` controls is every frequent episode).
    #[arg(long, default_value_t = 10)]
    min_count: u64,
    /// Largest episode size mined (3 adds the whole chain).
    #[arg(long, default_value_t = 2)]
    max_level: usize,
    /// Procedures, comma-separated: `max-t` (the family every frequent episode) and `guided`
    /// (the family selected on the first half, `--test-top` 200 a level); a row each.
    #[arg(long, value_delimiter = ',', default_values_t = [Correction::MaxT], value_parser = parse_correction)]
    correction: Vec<Correction>,
    /// `--surrogates`, `--n-surrogates` (per test) and `--sample-split` (the family chosen on
    /// the leading fraction of each recording, tested on the rest).
    #[command(flatten)]
    surrogates: SurrogateArgs,
    /// Seeds per cell.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    #[command(flatten)]
    output: OutputArg,
}

/// One cell's outcome over its seeds.
#[derive(Default)]
struct Cell {
    observed: f64,
    surrogate_mean: f64,
    /// The link's count in the tested data, summed over the tested seeds.
    tested_count: f64,
    /// Seeds in which the link was frequent, so tested.
    tested: u64,
    significant: u64,
    chain_significant: u64,
}

/// Runs the benchmark.
///
/// # Errors
/// Bad options, generator, mining or surrogate errors.
pub fn run(args: &PowerArgs) -> Result<()> {
    anyhow::ensure!(args.units >= 3, "`--units` must be at least 3 (the chain)");
    anyhow::ensure!(args.seeds >= 1, "`--seeds` must be at least 1");
    for c in &args.correction {
        anyhow::ensure!(
            matches!(c, Correction::MaxT | Correction::Guided),
            "`--correction {c}`: this benchmark runs `max-t` and `guided`"
        );
    }
    anyhow::ensure!(
        !args.correction.is_empty(),
        "`--correction`: give at least one procedure"
    );
    let (surrogates, method) = args.surrogates.bench_method()?;
    let (n_surrogates, sample_split) = (args.surrogates.n_surrogates, args.surrogates.sample_split);
    let mut out = args.output.writer()?;
    writeln!(
        out,
        "synfire bench power: {} units × {} s, chain u0 → u1 → u2 (6–9 ms), {}{} α = 0.05, {} {} surrogates, min count {}, level ≤ {}, {} seeds per cell",
        args.units,
        args.duration_s,
        args.correction
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        sample_split.map_or(String::new(), |f| format!(" (sample split {f})")),
        n_surrogates,
        surrogates,
        args.min_count,
        args.max_level,
        args.seeds
    )?;
    writeln!(out)?;
    let chain_col = if args.max_level >= 3 {
        " chain significant |"
    } else {
        ""
    };
    writeln!(
        out,
        "| procedure | rate Hz | evoke p | expected excess | observed (mean) | {} | significant |{chain_col} seconds |",
        if sample_split.is_some() || args.correction.contains(&Correction::Guided) {
            "test part: count vs surrogate mean (tested seeds)"
        } else {
            "surrogate mean (tested seeds)"
        }
    )?;
    writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|{}---:|",
        if args.max_level >= 3 { "---:|" } else { "" }
    )?;
    let ivs = Interval::parse_list("0-0.005,0.005-0.010")?;
    for &correction in &args.correction {
        for &rate in &args.rates_hz {
            for &p in &args.evoke {
                let started = Instant::now();
                let mut cell = Cell::default();
                for seed in 0..args.seeds {
                    let params = DenseParams {
                        units: args.units,
                        duration_s: args.duration_s,
                        rate_median_hz: rate,
                        rate_sigma: 0.0,
                        rate_range_hz: (rate * 0.999, rate * 1.001),
                        bursting_fraction: 0.0,
                        chains: vec![Chain {
                            neurons: vec![0, 1, 2],
                            delay_s: (0.006, 0.009),
                        }],
                        evoke_probability: p,
                        sync_pairs: Vec::new(),
                        seed: 1000 + seed,
                        ..DenseParams::neuropixels(seed)
                    };
                    let (stream, _) = generate_dense(&params)?;
                    let mut config =
                        MinerConfig::new(ivs.clone(), Threshold::MinCount(args.min_count));
                    config.max_level = args.max_level;
                    let sig = SignificanceConfig {
                        method: method.clone(),
                        n_surrogates,
                        alpha: 0.05,
                        correction,
                        seed,
                        test_top: None,
                        watch: None,
                        trials: None,
                        significant_only: false,
                        sample_split,
                    };
                    // As `synfire mine`: `guided` mines to two nodes and finds the rest itself.
                    let data = mine(&stream, &sig.mining_config(&config))?;
                    let r = test_episodes(&stream, &config, &data, &sig)?;
                    let ty = |u: usize| stream.alphabet().get(&format!("u{u}"));
                    let (Some(a), Some(b), Some(c)) = (ty(0), ty(1), ty(2)) else {
                        continue;
                    };
                    let link = Episode::new(vec![a, b], vec![ivs[1]]);
                    let whole: Vec<EventType> = vec![a, b, c];
                    // Counted whether frequent or not; tested only when frequent.
                    cell.observed += count_exact(&TypeIndex::new(&stream), &link) as f64;
                    if let Some(t) = r.tests.iter().find(|t| t.episode == link) {
                        cell.surrogate_mean += t.stats.surrogate_mean;
                        cell.tested_count += t.stats.test_count.unwrap_or(t.count) as f64;
                        cell.tested += 1;
                        cell.significant += u64::from(t.stats.significant);
                    }
                    let chain = Episode::new(whole, vec![ivs[1], ivs[1]]);
                    if let Some(t) = r.tests.iter().find(|t| t.episode == chain) {
                        cell.chain_significant += u64::from(t.stats.significant);
                    }
                }
                let n = args.seeds as f64;
                let chain = if args.max_level >= 3 {
                    format!(" {} of {} |", cell.chain_significant, args.seeds)
                } else {
                    String::new()
                };
                let tested = cell.tested as f64;
                let split = sample_split.is_some() || correction == Correction::Guided;
                let surrogate_mean = match (cell.tested, split) {
                    (0, false) => "not frequent".to_owned(),
                    (0, true) => "not tested".to_owned(),
                    (_, false) => format!("{:.1}", cell.surrogate_mean / tested),
                    (_, true) => format!(
                        "{:.1} vs {:.1}",
                        cell.tested_count / tested,
                        cell.surrogate_mean / tested
                    ),
                };
                writeln!(
                    out,
                    "| {correction} | {rate} | {p} | {:.0} | {:.1} | {surrogate_mean} | {} of {} |{chain} {:.1} |",
                    rate * args.duration_s * p,
                    cell.observed / n,
                    cell.significant,
                    args.seeds,
                    started.elapsed().as_secs_f64()
                )?;
                out.flush()?;
            }
        }
    }
    Ok(())
}
