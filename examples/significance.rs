//! Which episodes of a real recording are more than chance: the library side of
//! `synfire mine --surrogates`.
//!
//! Mines the bundled NWB session A2929-200711 (15 units, 98,794 spikes over 1,200 s;
//! `fixtures/PROVENANCE.md`) for episodes of up to 3 units at 0–5 and 5–10 ms and at least
//! 300 non-overlapped occurrences, then tests every frequent episode of two or more units
//! against 99 ISI-dithered surrogates (each unit's spikes moved within ±15 ms keeping its ISI
//! distribution) with the `max-t` procedure, which controls the family-wise error rate over all
//! of them (every surrogate is mined like the recording). Prints the significant episodes.
//!
//! ```sh
//! cargo run --release --example significance
//! ```
//!
//! The same seed gives the same surrogates and p-values. `docs/significance.md` explains the
//! surrogate methods and procedures.

use anyhow::{Context, Result};
use synfire::significance::{Correction, SignificanceOptions};
use synfire::{DeviceChoice, Interval, MineOptions, MiningOptions, Ordering, read_spikes};

fn main() -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/spikes/A2929-200711/A2929-200711.nwb"
    );
    let stream = read_spikes(path.as_ref(), Ordering::RequireSorted)?;
    let mut mining = MiningOptions::new(&Interval::parse_list("0.000-0.005,0.005-0.010")?);
    mining.min_count = Some(300);
    mining.max_level = 3;
    mining.device = DeviceChoice::Cpu;
    // The test (`synfire mine --surrogates isi-dither:0.015 --n-surrogates 99 --correction
    // max-t --seed 1`), in the options' `significance` slot.
    let mut test = SignificanceOptions::new("isi-dither:0.015".parse()?);
    test.n_surrogates = 99;
    test.alpha = 0.05;
    test.correction = Correction::MaxT;
    test.seed = 1;
    let options: MineOptions = mining.with_test(Some(test));

    // Mines, then tests what mining found: `synfire mine`'s job in one call.
    let mined = synfire::mine(&stream, &options)?;
    let outcome = mined
        .significance
        .context("the options carry a test, so the result has one")?;
    let significant: Vec<_> = outcome
        .tests
        .iter()
        .filter(|t| t.stats.significant)
        .collect();
    println!(
        "{} of {} frequent episodes significant ({} surrogates, {}, alpha {})",
        significant.len(),
        outcome.tests.len(),
        outcome.n_surrogates,
        outcome.method,
        outcome.alpha
    );
    for t in significant.iter().take(10) {
        println!(
            "    {} : {} (surrogates {:.1} ± {:.1}, z {:.1}, adjusted p {:.3})",
            t.episode.display(stream.alphabet()),
            t.count,
            t.stats.surrogate_mean,
            t.stats.surrogate_std,
            t.stats.statistic,
            t.stats.p_adjusted
        );
    }
    for w in &outcome.warnings {
        println!("warning: {w}");
    }
    Ok(())
}
