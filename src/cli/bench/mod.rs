//! `synfire bench …`: benchmarks that print tables, one file each; this file only dispatches.
//! Targets live here, never in timed tests.

mod closed_loop;
mod episodes;
pub mod heap;
mod motif;
mod power;
mod search;
mod session;
mod shapelet;
mod significance;
mod softdtw;
mod stream;
mod view;

use anyhow::Result;
use clap::{Args, Subcommand};

/// Options of `synfire bench`: which benchmark.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: BenchWhich,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
enum BenchWhich {
    /// Level-wise episode mining on Sym26, the real fixtures and the dense presets: per level,
    /// candidates, removed by bounds and by PreElim, frequent, seconds, candidate-events per
    /// second and peak heap.
    Episodes(episodes::EpisodesArgs),
    /// Streaming: ingest throughput over loopback ZeroMQ (synfire wire format) and the latency
    /// from a window's closing spike to its published result.
    Stream(stream::StreamArgs),
    /// Closed loop: from the publish of an episode's last spike (Open Ephys JSON and raw
    /// modes, a Poisson background at real time) to the TTL request at a mock of the Network
    /// Events plugin: p50, p99, max and the share of each step.
    ClosedLoop(closed_loop::ClosedLoopArgs),
    /// Significance against surrogates (`mine --surrogates`) on the dense workloads: tested,
    /// significant, seconds and surrogates per second per procedure.
    Significance(significance::BenchSignificanceArgs),
    /// A 1,000-unit, one-hour Neuropixels-like session with planted chains (and, if asked,
    /// co-modulated nulls), mined and tested as `synfire mine` does: units, seconds, spikes,
    /// procedure, S, wall seconds, peak RSS, episodes listed and significant, planted chains
    /// found whole, significant episodes holding a unit of no chain.
    Session(Box<session::BenchSessionArgs>),
    /// Where the power of `max-t` ends: a chain embedded at a grid of firing rates and evoke
    /// probabilities, found significant in how many seeds.
    Power(power::PowerArgs),
    /// Motif discovery: seeded random walk and the ECG, CPU and GPU paths, seconds and pairs
    /// evaluated or pruned.
    Motif(motif::BenchMotifArgs),
    /// Soft-DTW: forward and forward+backward cells per second on all pairs of two sets of
    /// random walks, and forward on one long pair, CPU and GPU.
    Softdtw(softdtw::BenchSoftDtwArgs),
    /// Similarity search: seeded random walks, SING (CPU, GPU) against brute force, latency,
    /// lower bounds and real distances per query.
    Search(search::BenchSearchArgs),
    /// Shapelet trees on the UCR sets (all lengths, step 1): CPU and GPU seconds, test
    /// accuracy beside the published figures.
    Shapelet(shapelet::BenchShapeletArgs),
    /// The live view (`run --ui`) against none: wall time and result latency of the A2929
    /// replay without the view, with it and no client, one reading, one stalled.
    View(view::BenchViewArgs),
}

/// Runs the chosen benchmark.
///
/// # Errors
/// The benchmark's own (bad options, unreadable fixtures, device failures, or a result that
/// differs from its reference).
pub fn run(args: &BenchArgs) -> Result<()> {
    match &args.which {
        BenchWhich::Episodes(a) => episodes::run(a),
        BenchWhich::Stream(a) => stream::run(a),
        BenchWhich::ClosedLoop(a) => closed_loop::run_bench(a),
        BenchWhich::Significance(a) => significance::run(a),
        BenchWhich::Session(a) => session::run(a),
        BenchWhich::Power(a) => power::run(a),
        BenchWhich::Motif(a) => motif::run(a),
        BenchWhich::Softdtw(a) => softdtw::run(a),
        BenchWhich::Search(a) => search::run(a),
        BenchWhich::Shapelet(a) => shapelet::run(a),
        BenchWhich::View(a) => view::run(a),
    }
}
