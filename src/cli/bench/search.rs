//! `synfire bench search`: SING (CPU, GPU) against brute force on seeded random walks.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use synfire::device::DeviceChoice;
use synfire::search::batch::SeriesOnDevice;
use synfire::search::collection::{znormalize, znormalize_into};
use synfire::search::query::CpuLowerBounds;
use synfire::search::{BuildOptions, CollectionKind, Index, QueryOptions, Searcher};

use crate::cli::args::OutputArg;

/// `synfire bench search`.
#[derive(Debug, Args)]
pub struct BenchSearchArgs {
    /// Random walks in the collection.
    #[arg(long, default_value_t = 10_000_000)]
    series: usize,
    /// Samples per series.
    #[arg(long, default_value_t = 256)]
    length: usize,
    /// Queries: half noisy copies of members, half fresh random walks.
    #[arg(long, default_value_t = 100)]
    queries: usize,
    /// Seed of the collection and the queries.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Neighbours per query.
    #[arg(long, default_value_t = 1)]
    k: usize,
    /// Devices to time, comma-separated: cpu, gpu, all (= cpu,gpu; the GPU is skipped with a
    /// note when there is none), or cpu-stream (SING with the CPU lower-bound producer thread:
    /// the chunk streaming the GPU uses, run on the CPU).
    #[arg(long, default_value = "all", value_delimiter = ',')]
    device: Vec<String>,
    /// Standard deviation of the noise added to the (z-normalised) members, as in the paper.
    #[arg(long, default_value_t = 0.1)]
    noise: f64,
    /// Series per leaf.
    #[arg(long, default_value_t = BuildOptions::default().leaf_capacity)]
    leaf_capacity: usize,
    /// Also time batched queries (`Searcher::query_batch`) at these batch sizes,
    /// comma-separated (e.g. `1,100,10000`), on the same devices: the query set is extended
    /// to the largest size with the same generator, each size runs `max(1, 1000 / size)`
    /// batches after a warm-up batch, and every batch answer must equal the CPU's batch
    /// answer (and, for the first `--queries`, brute force).
    #[arg(long, value_delimiter = ',')]
    batch: Vec<usize>,
    /// Write the collection (`series.f32`, `[series, length]` little-endian f32 in id order),
    /// the batch queries (`queries.f32`) and the answers (`answers.json`) to this directory,
    /// for an independent brute force on the same data (`tools/bench-search-torch.py`).
    #[arg(long)]
    save_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    output: OutputArg,
}

/// Random walk number `i` of the seeded collection: ChaCha8 with stream `i`, so any series
/// is regenerated alone and in parallel, independent of the thread count.
fn random_walk(seed: u64, i: u64, out: &mut [f64]) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(i);
    let mut acc = 0.0;
    for o in out {
        let s: f64 = StandardNormal.sample(&mut rng);
        acc += s;
        *o = acc;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let r = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[r.clamp(1, sorted.len()) - 1]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Cpu,
    CpuStream,
    Gpu,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::CpuStream => "cpu-stream",
            Self::Gpu => "gpu",
        }
    }
}

struct Timing {
    ms: Vec<f64>,
    lower_bounds: u64,
    producer_lower_bounds: u64,
    real_distances: u64,
}

/// Runs `synfire bench search` and prints a table.
///
/// # Errors
/// Bad options, a GPU failure with `--device gpu`, or any answer that differs from the
/// brute-force scan.
pub fn run(args: &BenchSearchArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    if args.series == 0 || args.length == 0 || args.queries == 0 || args.k == 0 {
        anyhow::bail!("`--series`, `--length`, `--queries` and `--k` must be at least 1");
    }
    let (seed, len) = (args.seed, args.length);
    let threads = rayon::current_num_threads();
    writeln!(
        out,
        "SING bench: {} random walks of length {len} (seed {seed}), {} queries, k = {}, {threads} CPU threads",
        args.series, args.queries, args.k
    )?;
    let started = Instant::now();
    let index = Index::build_with(
        args.series,
        len,
        CollectionKind::Series {
            source: format!("random walks, seed {seed}"),
        },
        BuildOptions {
            leaf_capacity: args.leaf_capacity,
        },
        |i| i as u32,
        |i, row| {
            let mut x = vec![0.0; row.len()];
            random_walk(seed, i as u64, &mut x);
            znormalize_into(&x, row);
        },
    )?;
    let build_s = started.elapsed().as_secs_f64();
    writeln!(
        out,
        "index: built in {build_s:.2} s (generation included; two passes), {} root subtrees, {} nodes, series {:.2} GB, iSAX {:.1} MB",
        index.tree().keys.len(),
        index.tree().nodes.len(),
        (args.series * len * 4) as f64 / 1e9,
        index.sax_bytes() as f64 / 1e6
    )?;
    // Queries: noisy copies of members and fresh walks (streams past the collection).
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut x = vec![0.0; len];
    let largest_batch = args.batch.iter().copied().max().unwrap_or(0);
    if args.batch.contains(&0) {
        anyhow::bail!("`--batch`: batch sizes must be at least 1");
    }
    let mut queries: Vec<(&str, Vec<f32>)> = (0..args.queries.max(largest_batch))
        .map(|j| {
            if j % 2 == 0 {
                let member = rng.random_range(0..args.series as u64);
                random_walk(seed, member, &mut x);
                let z = znormalize(&x);
                let noisy: Vec<f64> = z
                    .iter()
                    .map(|&v| {
                        let e: f64 = StandardNormal.sample(&mut rng);
                        f64::from(v) + args.noise * e
                    })
                    .collect();
                ("noisy", znormalize(&noisy))
            } else {
                random_walk(seed, args.series as u64 + j as u64, &mut x);
                ("fresh", znormalize(&x))
            }
        })
        .collect();
    let batch_queries: Vec<Vec<f32>> = queries.iter().map(|(_, q)| q.clone()).collect();
    queries.truncate(args.queries);
    // Brute force: the reference answers and the baseline times.
    let mut brute_ms = Vec::with_capacity(queries.len());
    let mut reference = Vec::with_capacity(queries.len());
    let _ = index.brute_force_normalized(&queries[0].1, args.k)?; // warm-up (page cache)
    for (_, q) in &queries {
        let t = Instant::now();
        let a = index.brute_force_normalized(q, args.k)?;
        brute_ms.push(t.elapsed().as_secs_f64() * 1e3);
        reference.push(a.neighbors);
    }
    let mut devices = Vec::new();
    for d in &args.device {
        match d.as_str() {
            "all" | "cpu" => devices.push(Mode::Cpu),
            "cpu-stream" => devices.push(Mode::CpuStream),
            "gpu" => {}
            other => anyhow::bail!("`--device {other}`: expected cpu, gpu, all or cpu-stream"),
        }
        if d == "all" || d == "gpu" {
            match synfire::device::probe() {
                Ok(_) => devices.push(Mode::Gpu),
                Err(e) if d == "all" => writeln!(out, "gpu: skipped ({e})")?,
                Err(e) => return Err(e).context("`--device gpu`"),
            }
        }
    }
    devices.dedup();
    let batch_devices = devices.clone();
    writeln!(out)?;
    writeln!(
        out,
        "| device | queries | median ms | p99 ms | queries/s | lower bounds/query | of which by the producer | real distances/query | brute-force median ms | speedup (median) | verified |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")?;
    let mut summary = Vec::new();
    let cpu_producer = CpuLowerBounds::new(&index);
    for mode in devices {
        let device = if mode == Mode::Gpu {
            DeviceChoice::Gpu
        } else {
            DeviceChoice::Cpu
        };
        let mut searcher = Searcher::new(&index, device, QueryOptions::default())?;
        let mut run = |q: &[f32]| -> Result<synfire::search::QueryAnswer> {
            Ok(if mode == Mode::CpuStream {
                index.knn_normalized(q, args.k, &QueryOptions::default(), Some(&cpu_producer))?
            } else {
                searcher.knn_normalized(q, args.k)?
            })
        };
        let _ = run(&queries[1].1)?; // warm-up (threads, NVRTC, caches)
        let label = mode.label();
        let mut by: std::collections::BTreeMap<&str, Timing> = Default::default();
        for (j, (kind, q)) in queries.iter().enumerate() {
            let t = Instant::now();
            let a = run(q)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let same = a.neighbors.len() == reference[j].len()
                && a.neighbors.iter().zip(&reference[j]).all(|(g, w)| {
                    g.id == w.id && (g.distance - w.distance).abs() <= 1e-5 * w.distance.max(1e-12)
                });
            anyhow::ensure!(
                same,
                "query {j} ({kind}) on the {label}: {:?} differs from brute force {:?}",
                a.neighbors,
                reference[j]
            );
            for key in [*kind, "all"] {
                let e = by.entry(key).or_insert(Timing {
                    ms: Vec::new(),
                    lower_bounds: 0,
                    producer_lower_bounds: 0,
                    real_distances: 0,
                });
                e.ms.push(ms);
                e.lower_bounds += a.stats.lower_bounds;
                e.producer_lower_bounds += a.stats.producer_lower_bounds;
                e.real_distances += a.stats.real_distances;
            }
        }
        for kind in ["noisy", "fresh", "all"] {
            let Some(t) = by.get_mut(kind) else { continue };
            t.ms.sort_by(f64::total_cmp);
            let mut b: Vec<f64> = queries
                .iter()
                .zip(&brute_ms)
                .filter(|((k, _), _)| kind == "all" || *k == kind)
                .map(|(_, &m)| m)
                .collect();
            b.sort_by(f64::total_cmp);
            let n = t.ms.len() as f64;
            let (med, bmed) = (percentile(&t.ms, 50.0), percentile(&b, 50.0));
            writeln!(
                out,
                "| {label} | {kind} ({}) | {med:.3} | {:.3} | {:.1} | {:.0} | {:.0} | {:.0} | {bmed:.2} | {:.1}x | yes |",
                t.ms.len(),
                percentile(&t.ms, 99.0),
                n / (t.ms.iter().sum::<f64>() / 1e3),
                t.lower_bounds as f64 / n,
                t.producer_lower_bounds as f64 / n,
                t.real_distances as f64 / n,
                bmed / med
            )?;
            if kind == "all" {
                summary.push((
                    label,
                    med,
                    t.lower_bounds as f64 / n,
                    t.real_distances as f64 / n,
                ));
            }
        }
    }
    let bmed = {
        let mut b = brute_ms.clone();
        b.sort_by(f64::total_cmp);
        percentile(&b, 50.0)
    };
    writeln!(out)?;
    writeln!(
        out,
        "Every answer equals the brute-force scan (same ids, distances within 1e-5 relative; both use one arithmetic)."
    )?;
    let factor = 1e8 / args.series as f64;
    writeln!(
        out,
        "Scaling to 10^8 series of length {len} (extrapolated from this run, x{factor:.0}): series {:.0} GB in host memory (two-pass build: one copy), iSAX array {:.1} GB on the GPU; brute force grows linearly (about {:.0} ms median); SING's lower-bound work grows at most linearly in the active share of the iSAX array (here {}), while real distances per query grow more slowly (the BSF tightens as the collection gets denser).",
        1e8 * len as f64 * 4.0 / 1e9,
        1.6,
        bmed * factor,
        summary
            .iter()
            .map(|(d, med, lb, rd)| format!(
                "{d}: {lb:.0} lower bounds and {rd:.0} real distances per query, median {med:.3} ms"
            ))
            .collect::<Vec<_>>()
            .join("; ")
    )?;
    if !args.batch.is_empty() {
        batches(
            &mut out,
            args,
            &index,
            &batch_queries,
            &reference,
            &batch_devices,
        )?;
    }
    out.flush()?;
    Ok(())
}

/// The batched-query table (`--batch`), and the saved data (`--save-dir`).
fn batches(
    out: &mut impl Write,
    args: &BenchSearchArgs,
    index: &Index,
    qs: &[Vec<f32>],
    reference: &[Vec<synfire::search::Neighbor>],
    devices: &[Mode],
) -> Result<()> {
    let key = |a: &synfire::search::QueryAnswer| {
        a.neighbors
            .iter()
            .map(|n| (n.id, n.squared.to_bits()))
            .collect::<Vec<_>>()
    };
    let mut sizes = args.batch.clone();
    sizes.sort_unstable();
    sizes.dedup();
    writeln!(out)?;
    writeln!(
        out,
        "Batched queries ({} queries: the first {} as above, then the same generator), k = {}:",
        qs.len(),
        reference.len(),
        args.k
    )?;
    // The CPU batch answers of every query: the reference of every other batch.
    let t = Instant::now();
    let cpu_answers = index.knn_batch_cpu(qs, args.k, &QueryOptions::default())?;
    writeln!(
        out,
        "reference: every query by the CPU batch path in {:.2} s; the first {} equal brute force",
        t.elapsed().as_secs_f64(),
        reference.len()
    )?;
    for (j, (a, want)) in cpu_answers.answers.iter().zip(reference).enumerate() {
        let want: Vec<_> = want.iter().map(|n| (n.id, n.squared.to_bits())).collect();
        anyhow::ensure!(
            key(a) == want,
            "batch query {j} on the cpu differs from brute force"
        );
    }
    writeln!(out)?;
    writeln!(
        out,
        "| device | batch | batches | median batch ms | p99 batch ms | median ms/query | queries/s | filter survivors/query | verified |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|")?;
    for &mode in devices.iter().filter(|m| **m != Mode::CpuStream) {
        let device = if mode == Mode::Gpu {
            DeviceChoice::Gpu
        } else {
            DeviceChoice::Cpu
        };
        let mut searcher = Searcher::new(index, device, QueryOptions::default())?;
        let t = Instant::now();
        searcher.prepare_batch()?;
        if mode == Mode::Gpu {
            writeln!(
                out,
                "gpu: PAA array{} uploaded in {:.2} s",
                match searcher.query_batch(&qs[..1], args.k)?.stats.series {
                    SeriesOnDevice::Exact => " and series",
                    SeriesOnDevice::Half => {
                        " and the series' half-precision copy (the series do not fit: exact distances on the host)"
                    }
                    SeriesOnDevice::No => {
                        " (neither the series nor a half-precision copy fit: exact distances on the host)"
                    }
                },
                t.elapsed().as_secs_f64()
            )?;
        }
        for &b in &sizes {
            let runs = (1000 / b).max(1);
            let _ = searcher.query_batch(&qs[..b.min(qs.len())], args.k)?; // warm-up
            let mut ms = Vec::with_capacity(runs);
            let mut survivors = 0u64;
            let mut answered = 0usize;
            for r in 0..runs {
                let first = (r * b) % qs.len();
                let chunk = &qs[first..(first + b).min(qs.len())];
                let t = Instant::now();
                let a = searcher.query_batch(chunk, args.k)?;
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                survivors += a.stats.filter_survivors;
                answered += chunk.len();
                anyhow::ensure!(
                    a.stats.cpu_fallbacks == 0 || mode == Mode::Cpu,
                    "{} queries fell back to the CPU",
                    a.stats.cpu_fallbacks
                );
                for (i, got) in a.answers.iter().enumerate() {
                    anyhow::ensure!(
                        key(got) == key(&cpu_answers.answers[first + i]),
                        "batch query {} on the {} differs from the CPU's answer",
                        first + i,
                        mode.label()
                    );
                }
            }
            let total_s = ms.iter().sum::<f64>() / 1e3;
            ms.sort_by(f64::total_cmp);
            let med = percentile(&ms, 50.0);
            writeln!(
                out,
                "| {} | {b} | {runs} | {med:.3} | {:.3} | {:.4} | {:.0} | {} | yes |",
                mode.label(),
                percentile(&ms, 99.0),
                med / b as f64,
                answered as f64 / total_s,
                if mode == Mode::Gpu {
                    format!("{:.0}", survivors as f64 / answered as f64)
                } else {
                    "-".into()
                }
            )?;
        }
    }
    if let Some(dir) = &args.save_dir {
        save(dir, index, qs, &cpu_answers)?;
        writeln!(
            out,
            "saved the collection, queries and answers to {}",
            dir.display()
        )?;
    }
    Ok(())
}

/// `--save-dir`: raw little-endian f32 arrays and the answers, for another brute force.
fn save(
    dir: &std::path::Path,
    index: &Index,
    qs: &[Vec<f32>],
    answers: &synfire::search::BatchAnswer,
) -> Result<()> {
    use std::io::BufWriter;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write_f32 = |name: &str, rows: &mut dyn Iterator<Item = &[f32]>| -> Result<()> {
        let path = dir.join(name);
        let mut w = BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        for row in rows {
            for v in row {
                w.write_all(&v.to_le_bytes())?;
            }
        }
        w.flush()?;
        Ok(())
    };
    // Series in id order (ids are 0..count here): leaf position of each id.
    let mut pos_of = vec![0u32; index.count()];
    for (pos, &id) in index.ids().iter().enumerate() {
        pos_of[id as usize] = pos as u32;
    }
    write_f32(
        "series.f32",
        &mut pos_of.iter().map(|&p| index.row(p as usize)),
    )?;
    write_f32("queries.f32", &mut qs.iter().map(Vec::as_slice))?;
    let doc = serde_json::json!({
        "series": index.count(), "length": index.series_len(), "queries": qs.len(),
        "ids": answers.answers.iter().map(|a| a.neighbors.iter().map(|n| n.id).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "distances": answers.answers.iter().map(|a| a.neighbors.iter().map(|n| n.distance).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });
    std::fs::write(dir.join("answers.json"), doc.to_string())?;
    Ok(())
}
