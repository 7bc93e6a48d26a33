//! phy/Kilosort folders: counts per unit equal the source files (read here with `npyz`
//! directly), times are samples over the rate, group filters count what they leave out, and
//! every broken folder gives an error naming the file.

use std::collections::BTreeMap;
use std::path::Path;

use synfire::event::Ordering;
use synfire::ingest::phy::{PhyOptions, read_phy};
use synfire::ingest::{IngestError, InputFormat, ReadOptions, read_spikes, read_spikes_with};
use tempfile::TempDir;

const TEMPLATE: &str = "fixtures/spikes/phy-template";
const CURATED: &str = "fixtures/spikes/np-curated-120s";

/// The values of an integer `.npy` file, widened to `i64`, read independently of synfire.
fn npy_i64(path: &Path) -> Vec<i64> {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    match npy.dtype().descr().as_str() {
        "'<u8'" => npy
            .into_vec::<u64>()
            .unwrap()
            .into_iter()
            .map(|v| i64::try_from(v).unwrap())
            .collect(),
        "'<u4'" => npy
            .into_vec::<u32>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        "'<i4'" => npy
            .into_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        other => panic!("unexpected dtype {other} in {}", path.display()),
    }
}

/// Spikes per cluster id in the source files.
fn source_counts(dir: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for id in npy_i64(&Path::new(dir).join("spike_clusters.npy")) {
        *counts.entry(id.to_string()).or_default() += 1;
    }
    counts
}

/// Spikes per unit label in a stream.
fn stream_counts(stream: &synfire::event::EventStream) -> BTreeMap<String, u64> {
    let labels = stream.alphabet().labels();
    stream
        .counts_per_type()
        .into_iter()
        .enumerate()
        .map(|(i, c)| (labels[i].clone(), c))
        .collect()
}

#[test]
fn phy_template_counts_and_times_equal_the_files() {
    let dir = Path::new(TEMPLATE);
    assert_eq!(InputFormat::from_path(dir).unwrap(), InputFormat::Phy);
    assert_eq!(
        InputFormat::from_path(&dir.join("params.py")).unwrap(),
        InputFormat::Phy
    );
    let rec = read_phy(dir, &PhyOptions::default()).unwrap();
    assert_eq!(rec.sample_rate_hz, 25_000.0);
    assert_eq!(rec.sample_rate_source, "params.py");
    assert_eq!(rec.clusters_file, "spike_clusters.npy");
    assert_eq!(rec.dropped_spikes, 0);
    assert_eq!(stream_counts(&rec.stream), source_counts(TEMPLATE));
    // Every spike at sample / rate, in the files' order (sorted there).
    let samples = npy_i64(&dir.join("spike_times.npy"));
    let clusters = npy_i64(&dir.join("spike_clusters.npy"));
    let mut expected: Vec<(f64, String)> = samples
        .iter()
        .zip(&clusters)
        .map(|(&s, c)| (s as f64 / 25_000.0, c.to_string()))
        .collect();
    expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut got: Vec<(f64, String)> = rec
        .stream
        .iter()
        .map(|(t, ty)| (t, rec.stream.alphabet().label(ty).to_owned()))
        .collect();
    got.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    assert_eq!(got, expected);
    // Units numbered in ascending cluster id.
    let ids: Vec<i64> = rec
        .stream
        .alphabet()
        .labels()
        .iter()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // The group file's one row; every other cluster is unsorted.
    let good: Vec<i64> = rec
        .clusters
        .iter()
        .filter(|c| c.group == "good")
        .map(|c| c.id)
        .collect();
    assert_eq!(good, [4]);
    assert!(
        rec.clusters
            .iter()
            .all(|c| c.id == 4 || c.group == "unsorted")
    );
}

#[test]
fn curated_neuropixels_folder_needs_its_rate_and_filters_by_group() {
    let dir = Path::new(CURATED);
    let err = read_spikes(dir, Ordering::RequireSorted).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("params.py") && msg.contains("--sample-rate-hz"),
        "{msg}"
    );
    let all = read_phy(
        dir,
        &PhyOptions {
            sample_rate_hz: Some(30_000.0),
            ..PhyOptions::default()
        },
    )
    .unwrap();
    assert_eq!(all.stream.len(), 379_321);
    assert_eq!(all.stream.alphabet().len(), 404);
    assert_eq!(stream_counts(&all.stream), source_counts(CURATED));
    let span_end = all.stream.times().last().copied().unwrap();
    assert!((span_end - 3_595_319.0 / 30_000.0).abs() < 1e-12);

    // `good` only: the good clusters' spikes, nothing else; the rest counted as dropped.
    let tsv = std::fs::read_to_string(dir.join("cluster_group.tsv")).unwrap();
    let good: Vec<String> = tsv
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, g)| g.trim() == "good")
        .map(|(id, _)| id.trim().to_owned())
        .collect();
    assert_eq!(good.len(), 140);
    let good_only = read_phy(
        dir,
        &PhyOptions {
            sample_rate_hz: Some(30_000.0),
            groups: Some(vec!["good".into()]),
            ..PhyOptions::default()
        },
    )
    .unwrap();
    let source = source_counts(CURATED);
    let expected: BTreeMap<String, u64> = source
        .iter()
        .filter(|(id, _)| good.contains(id))
        .map(|(id, &c)| (id.clone(), c))
        .collect();
    assert_eq!(stream_counts(&good_only.stream), expected);
    let kept: u64 = expected.values().sum();
    assert_eq!(good_only.dropped_spikes as u64, 379_321 - kept);
    assert_eq!(good_only.clusters.iter().filter(|c| c.kept).count(), 140);

    // Through the generic reader too.
    let via = read_spikes_with(
        dir,
        &ReadOptions {
            groups: Some(vec!["good".into()]),
            sample_rate_hz: Some(30_000.0),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(stream_counts(&via), expected);
    // A group nobody has: an error listing the groups present.
    let err = read_phy(
        dir,
        &PhyOptions {
            sample_rate_hz: Some(30_000.0),
            groups: Some(vec!["excellent".into()]),
            ..PhyOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("excellent") && err.contains("good, mua, noise"),
        "{err}"
    );
}

/// A folder with `spike_times.npy` and `spike_clusters.npy` of the given values and a
/// `params.py` (unless `params` is `None`).
fn folder(times: &[u64], clusters: &[i32], params: Option<&str>) -> TempDir {
    let dir = TempDir::new().unwrap();
    write_npy(&dir.path().join("spike_times.npy"), times);
    write_npy(&dir.path().join("spike_clusters.npy"), clusters);
    if let Some(p) = params {
        std::fs::write(dir.path().join("params.py"), p).unwrap();
    }
    dir
}

fn write_npy<T: npyz::Serialize + npyz::AutoSerialize + Copy>(path: &Path, values: &[T]) {
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(&[values.len() as u64])
        .writer(file)
        .begin_nd()
        .unwrap();
    w.extend(values.iter().copied()).unwrap();
    w.finish().unwrap();
}

fn phy_error(dir: &TempDir) -> String {
    let err = read_phy(dir.path(), &PhyOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&dir.path().display().to_string()),
        "the error names the folder's file: {msg}"
    );
    msg
}

const PARAMS: &str = "dat_path = 'x.dat'\nn_channels_dat = 4\nsample_rate = 30000.\n";

#[test]
fn broken_folders_give_named_errors() {
    // Lengths differ.
    let d = folder(&[1, 2, 3], &[0, 1], Some(PARAMS));
    let m = phy_error(&d);
    assert!(
        m.contains("spike_clusters.npy") && m.contains("has 2 entries"),
        "{m}"
    );
    // Unsorted: refused, or sorted on request.
    let d = folder(&[10, 5, 20], &[0, 1, 0], Some(PARAMS));
    let m = phy_error(&d);
    assert!(m.contains("spike_times.npy") && m.contains("--sort"), "{m}");
    let sorted = read_phy(
        d.path(),
        &PhyOptions {
            ordering: Ordering::SortIfNeeded,
            ..PhyOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        sorted.stream.times(),
        [5.0 / 30_000.0, 10.0 / 30_000.0, 20.0 / 30_000.0]
    );
    // No cluster file at all.
    let d = folder(&[1, 2], &[0, 0], Some(PARAMS));
    std::fs::remove_file(d.path().join("spike_clusters.npy")).unwrap();
    let m = phy_error(&d);
    assert!(m.contains("spike_templates.npy"), "{m}");
    // spike_templates.npy stands in.
    write_npy(&d.path().join("spike_templates.npy"), &[7u32, 3]);
    let rec = read_phy(d.path(), &PhyOptions::default()).unwrap();
    assert_eq!(rec.clusters_file, "spike_templates.npy");
    assert_eq!(rec.stream.alphabet().labels(), ["3", "7"]);
    // Times in seconds (floats) are refused with a hint.
    let d = folder(&[1], &[0], Some(PARAMS));
    write_npy(&d.path().join("spike_times.npy"), &[0.5f64]);
    let m = phy_error(&d);
    assert!(m.contains("<f8") && m.contains("samples"), "{m}");
    // Negative samples.
    let d = folder(&[], &[], Some(PARAMS));
    write_npy(&d.path().join("spike_times.npy"), &[-3i64]);
    write_npy(&d.path().join("spike_clusters.npy"), &[0i32]);
    let m = phy_error(&d);
    assert!(m.contains("-3 samples"), "{m}");
    // Not an npy file.
    let d = folder(&[1], &[0], Some(PARAMS));
    std::fs::write(d.path().join("spike_times.npy"), b"\x93NUMPY garbage").unwrap();
    let m = phy_error(&d);
    assert!(m.contains("spike_times.npy") && m.contains(".npy"), "{m}");
    // params.py without a rate, with a bad one, with a non-positive one.
    for (text, needle) in [
        ("n_channels_dat = 4\n", "no `sample_rate"),
        ("sample_rate = thirty\n", "line 1"),
        ("sample_rate = 0\n", "positive"),
    ] {
        let d = folder(&[1], &[0], Some(text));
        let m = phy_error(&d);
        assert!(m.contains("params.py") && m.contains(needle), "{text}: {m}");
    }
    // A malformed group file.
    let d = folder(&[1, 2], &[0, 1], Some(PARAMS));
    std::fs::write(
        d.path().join("cluster_group.tsv"),
        "cluster_id\tgroup\nzero\tgood\n",
    )
    .unwrap();
    let m = phy_error(&d);
    assert!(
        m.contains("cluster_group.tsv") && m.contains("row 2"),
        "{m}"
    );
    // No spikes.
    let d = folder(&[], &[], Some(PARAMS));
    assert!(matches!(
        read_phy(d.path(), &PhyOptions::default()),
        Err(IngestError::NoEvents { .. })
    ));
    // A folder that is not a phy folder.
    let d = TempDir::new().unwrap();
    let m = read_spikes(d.path(), Ordering::RequireSorted)
        .unwrap_err()
        .to_string();
    assert!(m.contains("spike_times.npy"), "{m}");
}

#[test]
fn group_precedence_is_phy_then_info_then_kilosort() {
    let d = folder(&[1, 2, 3, 4], &[0, 1, 2, 3], Some(PARAMS));
    let p = d.path();
    std::fs::write(
        p.join("cluster_KSLabel.tsv"),
        "cluster_id\tKSLabel\n0\tgood\n1\tmua\n2\tgood\n",
    )
    .unwrap();
    std::fs::write(
        p.join("cluster_info.tsv"),
        "id\tamp\tgroup\tKSLabel\n0\t1.0\t\tgood\n1\t2.0\tgood\tmua\n2\t3.0\t\tgood\n",
    )
    .unwrap();
    std::fs::write(p.join("cluster_group.tsv"), "cluster_id\tgroup\n2\tnoise\n").unwrap();
    let rec = read_phy(p, &PhyOptions::default()).unwrap();
    let groups: Vec<(i64, &str)> = rec
        .clusters
        .iter()
        .map(|c| (c.id, c.group.as_str()))
        .collect();
    assert_eq!(
        groups,
        [(0, "good"), (1, "good"), (2, "noise"), (3, "unsorted")]
    );
    // Options a phy folder has no use for are refused, and the reverse.
    let err = read_spikes_with(
        p,
        &ReadOptions {
            columns: synfire::ingest::csv::Columns {
                time: Some("t".into()),
                unit: None,
            },
            ..ReadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--time-column"), "{err}");
    let err = read_spikes_with(
        Path::new("fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"),
        &ReadOptions {
            groups: Some(vec!["good".into()]),
            ..ReadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--units") && err.contains("CSV"), "{err}");
}
