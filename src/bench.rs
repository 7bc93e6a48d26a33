//! `synfire bench …`: benchmarks that print tables. Targets live here, never in timed tests.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use synfire::episode::{
    CpuCounter, Interval, MinerConfig, MiningResult, NoProgress, Strategy, Threshold, mine_with,
};
use synfire::event::{EventStream, Ordering};
use synfire::ingest;
use synfire::synth::{self, SynthParams};

/// Options of `synfire bench episodes`.
#[derive(Debug, Args)]
pub struct EpisodesArgs {
    /// Timed repetitions per configuration after one warm-up run; the table shows medians.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Seed of the Sym26 stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The real session (NWB) benchmarked beside Sym26.
    #[arg(long, default_value = "fixtures/spikes/A2929-200711/A2929-200711.nwb")]
    fixture: PathBuf,
}

/// The Sym26 benchmark settings: four 2 ms-wide intervals (two of them hold the embedded
/// chains' delays) and a minimum count of 400, which keeps all 26 types frequent at level 1
/// (26 × 26 × 4 = 2,704 level-2 candidates) and recovers the short chain `A→B→C→D` and six
/// nodes of the long one.
pub fn sym26_config() -> MinerConfig {
    let intervals = Interval::parse_list("0.001-0.003,0.004-0.006,0.009-0.011,0.014-0.016")
        .expect("valid built-in intervals");
    MinerConfig::new(intervals, Threshold::MinCount(400))
}

/// The settings of the README's main job on the A2929 session: synaptic-scale delays
/// (0–5, 5–10, 10–20 ms), 0.2 occurrences per second, episodes of up to 4 neurons.
pub fn a2929_config() -> MinerConfig {
    let intervals = Interval::parse_list("0.000-0.005,0.005-0.010,0.010-0.020")
        .expect("valid built-in intervals");
    let mut config = MinerConfig::new(intervals, Threshold::PerSecond(0.2));
    config.max_level = 4;
    config
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn timed(
    stream: &EventStream,
    config: &MinerConfig,
    counter: &CpuCounter,
) -> Result<(MiningResult, f64)> {
    let t = Instant::now();
    let r = mine_with(stream, config, counter, &NoProgress)?;
    Ok((r, t.elapsed().as_secs_f64()))
}

/// Runs the benchmark and prints one table per dataset.
///
/// # Errors
/// If the fixture cannot be read or mining fails.
pub fn episodes(args: &EpisodesArgs) -> Result<()> {
    let repeat = args.repeat.max(1);
    let sym = synth::generate(&SynthParams::sym26(args.seed))?;
    let real = ingest::read_spikes(&args.fixture, Ordering::RequireSorted)?;
    println!(
        "synfire bench episodes: CPU exact counter on {} threads, median of {repeat} runs after 1 warm-up",
        rayon::current_num_threads()
    );
    for (name, stream, config) in [
        (format!("Sym26 (seed {})", args.seed), &sym, sym26_config()),
        (args.fixture.display().to_string(), &real, a2929_config()),
    ] {
        let counter = CpuCounter::new(stream);
        let mut one_cfg = config.clone();
        one_cfg.strategy = Strategy::OnePass;
        let (reference, _) = timed(stream, &config, &counter)?; // warm-up
        let mut per_level: Vec<Vec<f64>> = vec![Vec::new(); reference.levels.len()];
        let mut totals = Vec::new();
        let mut one_totals = Vec::new();
        for _ in 0..repeat {
            let (r, total) = timed(stream, &config, &counter)?;
            anyhow::ensure!(r.episodes == reference.episodes, "non-deterministic result");
            for (acc, l) in per_level.iter_mut().zip(&r.levels) {
                acc.push(l.seconds);
            }
            totals.push(total);
            let (one, one_total) = timed(stream, &one_cfg, &counter)?;
            anyhow::ensure!(
                one.episodes == reference.episodes,
                "one-pass and two-pass results differ"
            );
            one_totals.push(one_total);
        }
        let ivs: Vec<String> = config.intervals.iter().map(ToString::to_string).collect();
        println!();
        println!(
            "{name}: {} events, {} types, span {:.1} s, intervals {}, {:?} -> min count {}",
            stream.len(),
            stream.alphabet().len(),
            stream.span(),
            ivs.join(" "),
            config.threshold,
            reference.min_count
        );
        println!(
            "{:>5} {:>11} {:>11} {:>9} {:>11} {:>16}",
            "level", "candidates", "preelim_elim", "frequent", "seconds", "cand-events/s"
        );
        for (l, secs) in reference.levels.iter().zip(per_level) {
            let s = median(secs);
            println!(
                "{:>5} {:>11} {:>11} {:>9} {:>11.5} {:>16.3e}",
                l.level,
                l.candidates,
                l.eliminated_by_preelim,
                l.frequent,
                s,
                l.candidate_events as f64 / s.max(1e-12)
            );
        }
        println!(
            "total two-pass {:.4} s, one-pass {:.4} s, {} frequent episodes",
            median(totals),
            median(one_totals),
            reference.episodes.len()
        );
    }
    Ok(())
}
