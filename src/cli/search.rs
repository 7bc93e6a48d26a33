//! `synfire search build|query`: SING indexes of series and their exact k nearest neighbours
//! (thin over [`synfire::search`]).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use synfire::search::collection::normalize_query;
use synfire::search::{
    BuildOptions, Collection, CollectionKind, Index, QueryOptions, QueryStats, Searcher,
};

use crate::cli::args::{DeviceArgs, FormatArg, OutputArg};

/// `synfire search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(subcommand)]
    command: SearchCommand,
}

#[derive(Debug, Subcommand)]
enum SearchCommand {
    /// Build an index directory from a collection (UCR `.ts`/`.tsv`/`.txt`, `.npy [B, L]`) or,
    /// with `--window M`, from every length-M subsequence of one long series.
    Build(BuildArgs),
    /// Exact k nearest neighbours of each query series in an index.
    Query(QueryArgs),
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// The data: a collection file, or with `--window` one series (text, `.npy`,
    /// `file.csv[:COLUMN]`, `file.nwb:/path`).
    data: String,
    /// The index directory to write.
    #[arg(long)]
    index: PathBuf,
    /// Index the z-normalised sliding windows of this length (samples) of one long series.
    #[arg(long)]
    window: Option<usize>,
    /// Series per leaf before it splits.
    #[arg(long, default_value_t = BuildOptions::default().leaf_capacity)]
    leaf_capacity: usize,
}

#[derive(Debug, Args)]
struct QueryArgs {
    /// The index directory (`synfire search build`).
    #[arg(long)]
    index: PathBuf,
    /// The queries: a collection file of series of the index's length.
    queries: PathBuf,
    /// Neighbours per query.
    #[arg(long, default_value_t = 1)]
    k: usize,
    /// Queries answered together (`Searcher::query_batch`): on a GPU, the PAA bound of every
    /// (query, series) pair and exact distances of the survivors, on the device that holds
    /// the index's PAA array and, when they fit, its series (uploaded once: about 1 s per
    /// 1.2 GB of series); on the CPU, the batch's queries in parallel. `1`: one query at a
    /// time by SING (GPU lower bounds only; nothing but the iSAX array is uploaded).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    #[command(flatten)]
    device: DeviceArgs,
    /// Output format.
    ///
    /// `text`: one line per neighbour; `json`: one JSON object.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
}

/// Runs `synfire search build|query`.
///
/// # Errors
/// Unreadable or bad input, an unusable index directory, `k = 0`, a GPU failure with
/// `--device gpu`.
pub fn run(args: &SearchArgs) -> Result<()> {
    match &args.command {
        SearchCommand::Build(a) => build(a),
        SearchCommand::Query(a) => query(a),
    }
}

fn build(args: &BuildArgs) -> Result<()> {
    let started = Instant::now();
    let collection = match args.window {
        Some(m) => {
            let x = synfire::series::read_series(&args.data)
                .with_context(|| format!("reading the series `{}`", args.data))?;
            Collection::sliding_windows(&args.data, &x, m)?
        }
        None => {
            let d = synfire::series::read_dataset(args.data.as_ref())
                .with_context(|| format!("reading the collection `{}`", args.data))?;
            Collection::from_dataset(&args.data, &d)?
        }
    };
    if let CollectionKind::Windows { skipped, .. } = collection.kind()
        && *skipped > 0
    {
        tracing::warn!(
            skipped,
            "Left out subsequences holding NaN or infinite samples."
        );
    }
    let index = Index::build(
        &collection,
        BuildOptions {
            leaf_capacity: args.leaf_capacity,
        },
    )?;
    index
        .save(&args.index)
        .with_context(|| format!("writing the index `{}`", args.index.display()))?;
    tracing::info!(
        index = %args.index.display(),
        series = index.count(),
        length = index.series_len(),
        root_subtrees = index.tree().keys.len(),
        nodes = index.tree().nodes.len(),
        seconds = started.elapsed().as_secs_f64(),
        "Built the index."
    );
    Ok(())
}

fn query(args: &QueryArgs) -> Result<()> {
    let target = args.device.single("search query")?;
    if args.k == 0 {
        anyhow::bail!("`--k` must be at least 1");
    }
    if args.batch == 0 {
        anyhow::bail!("`--batch` must be at least 1");
    }
    let index = Index::load(&args.index)?;
    let data = synfire::series::read_dataset(&args.queries)
        .with_context(|| format!("reading the queries `{}`", args.queries.display()))?;
    let qs: Vec<Vec<f32>> = data
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s.dims != 1 {
                anyhow::bail!(
                    "{}: query {i} has {} dimensions; search needs univariate series",
                    args.queries.display(),
                    s.dims
                );
            }
            normalize_query(i, &s.values, index.series_len())
                .with_context(|| format!("{}", args.queries.display()))
        })
        .collect::<Result<_>>()?;
    let mut searcher =
        Searcher::new(&index, target, QueryOptions::default()).context("`--device gpu`")?;
    let started = Instant::now();
    let mut results = Vec::with_capacity(qs.len());
    let mut total = QueryStats::default();
    let mut add = |a: synfire::search::QueryAnswer, results: &mut Vec<_>| {
        total.lower_bounds += a.stats.lower_bounds;
        total.producer_lower_bounds += a.stats.producer_lower_bounds;
        total.real_distances += a.stats.real_distances;
        results.push((results.len(), a.neighbors));
    };
    if args.batch == 1 {
        for (i, q) in qs.iter().enumerate() {
            let a = searcher
                .knn_normalized(q, args.k)
                .with_context(|| format!("query {i}"))?;
            add(a, &mut results);
        }
    } else {
        for (b, chunk) in qs.chunks(args.batch).enumerate() {
            let first = b * args.batch;
            let a = searcher
                .query_batch(chunk, args.k)
                .with_context(|| format!("queries {first}..{}", first + chunk.len()))?;
            for a in a.answers {
                add(a, &mut results);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Json => {
            let doc = json!({
                "index": {"series": index.count(), "length": index.series_len(),
                          "collection": index.kind()},
                "k": args.k,
                "batch": args.batch,
                "device": searcher.device(),
                "results": results.iter().map(|(i, n)| json!({"query": i, "neighbors": n}))
                    .collect::<Vec<Value>>(),
                "stats": {"queries": qs.len(), "lower_bounds": total.lower_bounds,
                          "device_lower_bounds": total.producer_lower_bounds,
                          "real_distances": total.real_distances, "seconds": seconds},
            });
            writeln!(out, "{doc}")?;
        }
        FormatArg::Text => {
            for (i, ns) in &results {
                for (r, n) in ns.iter().enumerate() {
                    writeln!(
                        out,
                        "query {i}  rank {}  id {}  distance {:.9}",
                        r + 1,
                        n.id,
                        n.distance
                    )?;
                }
            }
            writeln!(
                out,
                "{} queries, {} lower bounds, {} real distances, {seconds:.3} s on the {}",
                qs.len(),
                total.lower_bounds,
                total.real_distances,
                searcher.device()
            )?;
        }
    }
    out.flush()?;
    Ok(())
}
