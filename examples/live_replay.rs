//! The live pipeline on an archived session: `synfire::live::run` on `pipelines/replay-nwb.toml`.
//!
//! The bundled pipeline replays the NWB session A2929-200711 (`fixtures/PROVENANCE.md`) as two
//! streams: the 15 units' spikes, mined for frequent episodes per 120 s window (hop 60 s), and
//! the head-direction series (`/acquisition/CompassDirection/rz`, radians, ~120 Hz), summarised
//! and searched for its closest pair of 2 s head turns per 10 s window. This example loads that
//! file unchanged except for its sink (results go to a JSON-lines file in the temporary
//! directory instead of standard output), receives every result through `RunOptions::tap`, and
//! prints a summary per stage, with its result latencies from the run's summary.
//!
//! ```sh
//! cargo run --release --example live_replay
//! ```
//!
//! Paths inside a pipeline file are relative to the working directory, so the example runs
//! from the crate root. Stages with `device = "auto"` use a GPU when one is usable.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::Value;
use synfire::live::config::PipelineConfig;
use synfire::live::sink::jsonl::JsonlConfig;
use synfire::live::{RunOptions, run};

fn main() -> Result<()> {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR"))?;
    let mut config = PipelineConfig::load("pipelines/replay-nwb.toml".as_ref())?;
    let results = std::env::temp_dir().join("synfire-live-replay.jsonl");
    let _ = std::fs::remove_file(&results); // the sink appends
    for sink in config.sinks.values_mut() {
        if let Some(jsonl) = sink.options_mut::<JsonlConfig>() {
            jsonl.path = Some(results.clone());
        }
    }

    let (tap, outputs) = crossbeam_channel::unbounded();
    let summary = run(
        &config,
        RunOptions {
            tap: Some(tap),
            ..Default::default()
        },
    )?;
    for (source, (accepted, dropped, malformed)) in &summary.sources {
        println!("source {source}: {accepted} events, {dropped} dropped, {malformed} malformed");
    }

    let mut per_stage: BTreeMap<String, usize> = BTreeMap::new();
    let mut closest_turn: Option<(f64, f64)> = None; // (distance, window start s)
    for out in outputs.try_iter() {
        *per_stage.entry(out.stage.to_string()).or_default() += 1;
        let result: Value = serde_json::from_str(&out.json)?;
        let start = result["window_start_s"].as_f64().unwrap_or(f64::NAN);
        match &*out.stage {
            "episodes" if result["window_index"] == 0 => {
                let episodes = result["episodes"].as_array().map_or(0, Vec::len);
                let end = result["window_end_s"].as_f64().unwrap_or(f64::NAN);
                println!(
                    "episodes, first window [{start:.1}, {end:.1}) s: {episodes} frequent \
                     (min count {})",
                    result["min_count"]
                );
            }
            "heading_motif" => {
                if let Some(d) = result["motifs"][0]["distance"].as_f64()
                    && closest_turn.is_none_or(|(best, _)| d < best)
                {
                    closest_turn = Some((d, start));
                }
            }
            _ => {}
        }
    }
    for (stage, n) in &per_stage {
        println!("stage {stage}: {n} windows");
    }
    // Wall-clock seconds from each window's close to its line written; an archive replayed
    // as fast as possible queues windows, so these measure the queue.
    for (stage, per_sink) in &summary.result_latency {
        for (sink, l) in per_sink {
            println!(
                "stage {stage} at sink {sink}: result latency p50 {:.3} s, p99 {:.3} s, max {:.3} s",
                l.p50().unwrap_or(0.0),
                l.p99().unwrap_or(0.0),
                l.max().unwrap_or(0.0)
            );
        }
    }
    if let Some((d, start)) = closest_turn {
        println!("closest pair of head turns: distance {d:.4} in the window from {start:.1} s");
    }
    println!("every result: {}", results.display());
    Ok(())
}
