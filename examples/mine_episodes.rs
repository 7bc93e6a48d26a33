//! Frequent serial episodes of a real recording: the library side of `synfire mine`.
//!
//! Reads the bundled NWB session A2929-200711 (15 units of mouse ADn and CA1, 98,794 spikes
//! over 1,200 s; `fixtures/PROVENANCE.md`), mines episodes `A → B → …` of up to 4 units whose
//! consecutive spikes lie 0–5, 5–10 or 10–20 ms apart and that occur at least 0.2 times per
//! second (non-overlapped occurrences), and prints each level's statistics and its strongest
//! episodes.
//!
//! ```sh
//! cargo run --release --example mine_episodes
//! ```
//!
//! Input: spike times, `f64` seconds, one event type per unit (labelled by its NWB unit id).
//! Intervals are `(low, high]` delays in seconds. `DeviceChoice::Auto` counts on the GPUs when
//! there are any and on the CPU otherwise; the counts are the same either way.

use anyhow::Result;
use synfire::episode::SupportPer;
use synfire::{DeviceChoice, Interval, MiningOptions, Ordering, read_spikes};

fn main() -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/spikes/A2929-200711/A2929-200711.nwb"
    );
    let stream = read_spikes(path.as_ref(), Ordering::RequireSorted)?;
    println!(
        "{} spikes of {} units over {:.1} s",
        stream.len(),
        stream.alphabet().len(),
        stream.span()
    );

    // The same options as `synfire mine --intervals 0.000-0.005,0.005-0.010,0.010-0.020
    // --support 0.2 --support-per seconds --max-level 4 --device auto`.
    let intervals = Interval::parse_list("0.000-0.005,0.005-0.010,0.010-0.020")?;
    let mut options = MiningOptions::new(&intervals);
    options.support = Some(0.2);
    options.support_per = SupportPer::Seconds;
    options.max_level = 4;
    options.device = DeviceChoice::Auto;

    // Checks the options, chooses the device and its counter, and mines: `synfire mine`'s
    // job (with `significance` in `MineOptions`, also its test; `examples/significance.rs`).
    let result = synfire::mine(&stream, &options)?.result;

    println!("min count {} occurrences", result.min_count);
    for level in &result.levels {
        println!(
            "level {}: {} candidates, {} eliminated by PreElim, {} frequent, {:.3} s",
            level.level,
            level.candidates,
            level.eliminated_by_preelim,
            level.frequent,
            level.seconds
        );
        // Episodes are sorted by level, then by count (descending): the first are the strongest.
        let top = result
            .episodes
            .iter()
            .filter(|f| f.episode.len() == level.level);
        for f in top.take(3) {
            println!("    {} : {}", f.episode.display(stream.alphabet()), f.count);
        }
    }
    Ok(())
}
