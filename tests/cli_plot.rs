//! `synfire plot raster | levels | significance` on the real 15-unit fixture: each picture is
//! checked by what it must show, read back from the SVG's elements (the highlighted
//! occurrences are the ones `synfire count --occurrences` lists in the window, at their times;
//! bars follow the log scale; dots and surrogate bars sit at the document's values) and from
//! the decoded PNG (its size, the highlight colours present). Bad inputs are errors that name
//! the file, never panics.

mod common;
use common::synfire;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use plotters::style::RGBColor;
use serde_json::Value;
use synfire::event::Ordering;
use synfire::ingest::read_spikes;
use synfire::plot::{PALETTE, levels, raster, significance};
use tempfile::TempDir;

/// The real 15-unit fixture (98,794 spikes over about 1200 s).
const A2929: &str = "fixtures/spikes/A2929-200711/A2929-200711.nwb";
/// Mining settings of the episodes drawn: one 10–20 ms gap.
const MINE: [&str; 6] = [
    "--intervals",
    "(0.01,0.02]",
    "--max-level",
    "2",
    "--support",
    "0.003",
];

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn run_ok(args: &[&str]) -> String {
    let out = synfire(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command that must fail cleanly (exit status 1, not a panic's 101); its stderr.
fn run_err(args: &[&str]) -> String {
    let out = synfire(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} must fail cleanly: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// `12345` → `12,345`, as the pictures write counts.
fn thousands(n: usize) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (k, c) in d.chars().enumerate() {
        if k > 0 && (d.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One SVG element: its tag, attributes and (for `<text>`) its text.
#[derive(Debug)]
struct El {
    tag: String,
    attrs: HashMap<String, String>,
    text: String,
}

impl El {
    fn attr(&self, k: &str) -> &str {
        self.attrs.get(k).map_or("", String::as_str)
    }
    fn num(&self, k: &str) -> f64 {
        self.attr(k)
            .parse()
            .unwrap_or_else(|_| panic!("{k} of {self:?}"))
    }
    /// `points="x,y x,y "` of a polyline.
    fn points(&self) -> Vec<(f64, f64)> {
        self.attr("points")
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The elements of an SVG document as plotters writes it (one element per tag, attributes in
/// double quotes, text on its own lines).
fn elements(svg: &str) -> Vec<El> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        if rest.starts_with('/') {
            continue;
        }
        let end = rest.find('>').unwrap();
        let head = &rest[..end];
        let tag: String = head
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let mut attrs = HashMap::new();
        let mut a = &head[tag.len()..];
        while let Some(eq) = a.find("=\"") {
            let key = a[..eq].trim().to_owned();
            let after = &a[eq + 2..];
            let close = after.find('"').unwrap();
            attrs.insert(key, unescape(&after[..close]));
            a = &after[close + 1..];
        }
        let mut text = String::new();
        if tag == "text" {
            let body = &rest[end + 1..];
            text = unescape(body[..body.find("</text>").unwrap()].trim());
        }
        out.push(El { tag, attrs, text });
        rest = &rest[end + 1..];
    }
    out
}

fn texts<'a>(els: &'a [El], anchor: &str) -> Vec<&'a El> {
    els.iter()
        .filter(|e| e.tag == "text" && e.attr("text-anchor") == anchor)
        .collect()
}

/// The x-axis ticks: (pixel, value) of the numeric labels centred under the axis.
fn x_ticks(els: &[El]) -> Vec<(f64, f64)> {
    texts(els, "middle")
        .into_iter()
        .filter(|e| e.attr("dy") == "0.76em" && !e.attrs.contains_key("transform"))
        .filter_map(|e| Some((e.num("x"), e.text.replace(',', "").parse::<f64>().ok()?)))
        .collect()
}

/// The linear map value → pixel of the x axis, from its first and last ticks.
fn x_map(ticks: &[(f64, f64)]) -> impl Fn(f64) -> f64 + use<> {
    let (p0, v0) = ticks[0];
    let (p1, v1) = *ticks.last().unwrap();
    let scale = (p1 - p0) / (v1 - v0);
    move |v| p0 + (v - v0) * scale
}

/// `synfire mine` of the fixture (text); its level-2 episodes of two different units.
fn mined_pairs() -> Vec<String> {
    let input = fixture(A2929);
    let mut args = vec!["mine", s(&input), "-q"];
    args.extend_from_slice(&MINE);
    run_ok(&args)
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('-'))
        .map(|l| l.split(" : ").next().unwrap().to_owned())
        .filter(|e| {
            let units: Vec<&str> = e.split("-(10,20]ms-").collect();
            units[0] != units[1]
        })
        .collect()
}

/// Writes an episodes file with `episodes` among a comment and a single unit (both skipped
/// by `plot`), and the CSV of their occurrences from `synfire count --occurrences`: the spike
/// times of every occurrence, by episode.
fn episodes_and_occurrences(
    dir: &Path,
    episodes: &[String],
) -> (PathBuf, BTreeMap<String, Vec<Vec<f64>>>) {
    let only = dir.join("only.txt");
    std::fs::write(&only, episodes.join("\n")).unwrap();
    let csv_path = dir.join("occ.csv");
    let input = fixture(A2929);
    run_ok(&["count", s(&only), s(&input), "--occurrences", s(&csv_path)]);
    let file = dir.join("episodes.txt");
    let mut text = String::from("# chosen from synfire mine\n6 : 19819\n");
    for (k, e) in episodes.iter().enumerate() {
        text.push_str(&format!("{e} : {k}\n"));
    }
    std::fs::write(&file, &text).unwrap();
    let mut occ: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    for row in reader.records() {
        let row = row.unwrap();
        let key = (row[1].to_owned(), row[2].parse().unwrap());
        occ.entry(key).or_default().push(row[5].parse().unwrap());
    }
    let mut by_episode: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for ((e, _), times) in occ {
        by_episode.entry(e).or_default().push(times);
    }
    (file, by_episode)
}

#[test]
fn raster_svg_highlights_exactly_the_occurrences_in_the_window() {
    let dir = TempDir::new().unwrap();
    let chosen: Vec<String> = mined_pairs().into_iter().take(3).collect();
    assert_eq!(chosen.len(), 3, "{chosen:?}");
    let (episodes, occ) = episodes_and_occurrences(dir.path(), &chosen);
    let input = fixture(A2929);
    let svg_path = dir.path().join("raster.svg");
    let (start, end) = (100.0, 103.0);
    run_ok(&[
        "plot",
        "raster",
        s(&input),
        "--episodes",
        s(&episodes),
        "--start-s",
        "100",
        "--end-s",
        "103",
        "-o",
        s(&svg_path),
    ]);
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let els = elements(&svg);

    // Axes: the time ticks lie in the window and span most of it; the caption names it.
    let ticks = x_ticks(&els);
    assert!(ticks.len() >= 5, "{ticks:?}");
    assert!(
        ticks.iter().all(|&(_, v)| (start..=end).contains(&v)),
        "{ticks:?}"
    );
    assert!(
        ticks.last().unwrap().1 - ticks[0].1 >= 0.8 * (end - start),
        "{ticks:?}"
    );
    assert!(
        els.iter()
            .any(|e| e.tag == "text" && e.text.contains("from 100.00 s to 103.00 s")),
        "caption"
    );
    let to_px = x_map(&ticks);

    // Rows: the episodes' units only, in the order they first name them.
    let mut units: Vec<String> = Vec::new();
    for e in &chosen {
        for u in e.split("-(10,20]ms-") {
            if !units.iter().any(|x| x == u) {
                units.push(u.to_owned());
            }
        }
    }
    let rows: Vec<&str> = texts(&els, "end").iter().map(|e| e.text.as_str()).collect();
    assert_eq!(rows, units);

    // Every spike of those units in the window is one grey tick.
    let stream = read_spikes(&input, Ordering::RequireSorted).unwrap();
    let spikes = stream
        .iter()
        .filter(|&(t, ty)| {
            (start..=end).contains(&t) && units.iter().any(|u| u == stream.alphabet().label(ty))
        })
        .count();
    let grey = hex(raster::SPIKE_GREY);
    let ticks_drawn = els
        .iter()
        .filter(|e| e.tag == "polyline" && e.attr("stroke") == grey)
        .count();
    assert_eq!(ticks_drawn, spikes);

    // Each episode: one line per occurrence wholly in the window, at its times; a coloured
    // tick per spike of those occurrences (plus the legend's swatch); the legend names it.
    let mut highlighted = 0;
    for (k, name) in chosen.iter().enumerate() {
        let all = &occ[name];
        let mut inside: Vec<&Vec<f64>> = all
            .iter()
            .filter(|o| o[0] >= start && *o.last().unwrap() <= end)
            .collect();
        inside.sort_by(|a, b| a[0].total_cmp(&b[0]));
        let colour = hex(PALETTE[k]);
        let mut lines: Vec<Vec<(f64, f64)>> = els
            .iter()
            .filter(|e| e.tag == "polyline" && e.attr("stroke") == colour)
            .map(El::points)
            .collect();
        assert_eq!(
            lines.len(),
            inside.len(),
            "{name}: occurrences in the window"
        );
        lines.sort_by(|a, b| a[0].0.total_cmp(&b[0].0));
        for (line, o) in lines.iter().zip(&inside) {
            assert_eq!(line.len(), 2, "{name}: a line through both spikes");
            for (p, &t) in line.iter().zip(o.iter()) {
                assert!((p.0 - to_px(t)).abs() <= 2.0, "{name}: {p:?} vs {t} s");
            }
        }
        let marks = els
            .iter()
            .filter(|e| e.tag == "rect" && e.attr("fill") == colour)
            .count();
        assert_eq!(marks, 2 * inside.len() + 1, "{name}: ticks and the swatch");
        let legend = format!(
            "{name} — {} of its {} occurrences in this window",
            inside.len(),
            thousands(all.len())
        );
        assert!(
            els.iter().any(|e| e.tag == "text" && e.text == legend),
            "legend `{legend}`"
        );
        highlighted += inside.len();
    }
    assert!(
        highlighted >= 3,
        "the window shows occurrences: {highlighted}"
    );
    // No fourth colour.
    assert!(!svg.contains(&hex(PALETTE[3])));
}

#[test]
fn raster_default_window_all_units_and_png() {
    let dir = TempDir::new().unwrap();
    let chosen: Vec<String> = mined_pairs().into_iter().skip(3).take(2).collect();
    let (episodes, occ) = episodes_and_occurrences(dir.path(), &chosen);
    let input = fixture(A2929);
    let stream = read_spikes(&input, Ordering::RequireSorted).unwrap();

    // Default window: 2 s from 0.1 s before the first occurrence; every unit with
    // `--all-units`, in the recording's order.
    let svg_path = dir.path().join("all.svg");
    run_ok(&[
        "plot",
        "raster",
        s(&input),
        "--episodes",
        s(&episodes),
        "--all-units",
        "-o",
        s(&svg_path),
    ]);
    let els = elements(&std::fs::read_to_string(&svg_path).unwrap());
    let rows: Vec<&str> = texts(&els, "end").iter().map(|e| e.text.as_str()).collect();
    assert_eq!(rows, stream.alphabet().labels());
    let first = occ
        .values()
        .flatten()
        .map(|o| o[0])
        .fold(f64::INFINITY, f64::min);
    let start = (first - 0.1).max(stream.start());
    let caption = els
        .iter()
        .find(|e| e.tag == "text" && e.text.contains("spikes from"))
        .unwrap();
    let words: Vec<&str> = caption.text.split_whitespace().collect();
    let from: f64 = words[words.len() - 5].parse().unwrap();
    let to: f64 = words[words.len() - 2].parse().unwrap();
    assert!((from - start).abs() < 0.006, "{} vs {start}", caption.text);
    assert!(
        (to - (start + 2.0)).abs() < 0.006,
        "{} vs {start}",
        caption.text
    );

    // PNG: the size asked for, and the episodes' colours (only theirs) in the pixels.
    let png_path = dir.path().join("raster.png");
    run_ok(&[
        "plot",
        "raster",
        s(&input),
        "--episodes",
        s(&episodes),
        "--width",
        "1000",
        "--height",
        "500",
        "-o",
        s(&png_path),
    ]);
    let (w, h, rgb) = decode(&png_path);
    assert_eq!((w, h), (1000, 500));
    for (k, &c) in PALETTE.iter().take(2).enumerate() {
        assert!(pixels(&rgb, c) > 50, "colour of episode {k}");
    }
    assert_eq!(pixels(&rgb, PALETTE[2]), 0, "no third episode");
    assert!(pixels(&rgb, raster::SPIKE_GREY) > 0, "grey spikes");
}

/// A PNG's width, height and RGB pixels, decoded here (chunks, CRCs, zlib, the five row
/// filters) for 8-bit RGB images without interlacing, the kind `synfire plot` writes.
fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
    use std::io::Read;
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let word = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    let (mut width, mut height, mut idat, mut ended) = (0, 0, Vec::new(), false);
    let mut pos = 8;
    while pos < bytes.len() {
        let len = word(pos) as usize;
        let kind = &bytes[pos + 4..pos + 8];
        let data = &bytes[pos + 8..pos + 8 + len];
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        assert_eq!(crc.sum(), word(pos + 8 + len), "CRC of a chunk");
        match kind {
            b"IHDR" => {
                (width, height) = (word(pos + 8), word(pos + 12));
                assert_eq!(data[8..13], [8, 2, 0, 0, 0], "8-bit RGB, not interlaced");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => ended = true,
            _ => {}
        }
        pos += 12 + len;
    }
    assert!(ended, "IEND");
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = width as usize * 3;
    assert_eq!(raw.len(), height as usize * (stride + 1));
    let mut rgb = vec![0u8; height as usize * stride];
    for y in 0..height as usize {
        let filter = raw[y * (stride + 1)];
        for x in 0..stride {
            let v = raw[y * (stride + 1) + 1 + x];
            let a = if x >= 3 { rgb[y * stride + x - 3] } else { 0 };
            let b = if y > 0 { rgb[(y - 1) * stride + x] } else { 0 };
            let c = if x >= 3 && y > 0 {
                rgb[(y - 1) * stride + x - 3]
            } else {
                0
            };
            let predicted = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("filter type {f}"),
            };
            rgb[y * stride + x] = v.wrapping_add(predicted);
        }
    }
    (width, height, rgb)
}

/// How many pixels have exactly colour `c`.
fn pixels(rgb: &[u8], c: RGBColor) -> usize {
    rgb.chunks_exact(3)
        .filter(|p| p[0] == c.0 && p[1] == c.1 && p[2] == c.2)
        .count()
}

/// `synfire mine --format json` of the fixture with `extra` options, written to `path`; the
/// document.
fn mine_json(path: &Path, max_level: &str, extra: &[&str]) -> Value {
    let input = fixture(A2929);
    let mut args = vec!["mine", s(&input), "-q", "--format", "json", "-o", s(path)];
    args.extend_from_slice(&MINE[..2]);
    args.extend_from_slice(&["--max-level", max_level, "--support", "0.003"]);
    args.extend_from_slice(extra);
    run_ok(&args);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn levels_bars_follow_the_counts_on_a_log_scale() {
    let dir = TempDir::new().unwrap();
    let json = dir.path().join("run.json");
    let doc = mine_json(&json, "3", &[]);
    let levels = doc["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3);
    let svg_path = dir.path().join("levels.svg");
    run_ok(&["plot", "levels", s(&json), "-o", s(&svg_path)]);
    let els = elements(&std::fs::read_to_string(&svg_path).unwrap());

    for name in ["candidates", "removed by bounds", "frequent"] {
        assert!(
            els.iter().any(|e| e.tag == "text" && e.text == name),
            "{name}"
        );
    }
    assert!(
        !els.iter().any(|e| e.text == "eliminated by PreElim"),
        "no PreElim bars on the CPU, which eliminates none"
    );
    let level_ticks: Vec<f64> = x_ticks(&els).iter().map(|t| t.1).collect();
    assert_eq!(level_ticks, [1.0, 2.0, 3.0], "one tick per level");

    // Bars (below the 76 px header): one per non-zero value, left to right by level.
    let mut bars: Vec<(f64, f64)> = Vec::new(); // (value, height px)
    for (key, colour) in [
        ("candidates", levels::CANDIDATES),
        ("removed_by_bounds", levels::REMOVED_BY_BOUNDS),
        ("frequent", levels::FREQUENT),
    ] {
        let mut rects: Vec<&El> = els
            .iter()
            .filter(|e| e.tag == "rect" && e.attr("fill") == hex(colour) && e.num("y") > 76.0)
            .collect();
        rects.sort_by(|a, b| a.num("x").total_cmp(&b.num("x")));
        let values: Vec<u64> = levels
            .iter()
            .map(|l| l[key].as_u64().unwrap())
            .filter(|&v| v > 0)
            .collect();
        assert_eq!(rects.len(), values.len(), "{key}");
        for (r, &v) in rects.iter().zip(&values) {
            #[allow(clippy::cast_precision_loss)]
            bars.push((v as f64, r.num("height")));
            assert!(
                els.iter()
                    .any(|e| e.tag == "text" && e.text == thousands(v as usize)),
                "the number {v} over its bar"
            );
        }
    }
    // Log scale: height differences are proportional to log ratios of the values.
    let &(top_v, top_h) = bars.iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
    let per_e: Vec<f64> = bars
        .iter()
        .filter(|&&(v, _)| v < top_v / 3.0)
        .map(|&(v, h)| (top_h - h) / (top_v / v).ln())
        .collect();
    assert!(per_e.len() >= 3, "{bars:?}");
    let (lo, hi) = per_e
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(hi / lo < 1.05, "pixels per e-fold {per_e:?}");

    // PNG: decodes, default size, the three colours drawn.
    let png_path = dir.path().join("levels.png");
    run_ok(&[
        "plot",
        "levels",
        s(&json),
        "--height",
        "480",
        "-o",
        s(&png_path),
    ]);
    let (_, h, rgb) = decode(&png_path);
    assert_eq!(h, 480);
    for c in [
        levels::CANDIDATES,
        levels::REMOVED_BY_BOUNDS,
        levels::FREQUENT,
    ] {
        assert!(pixels(&rgb, c) > 100);
    }
}

#[test]
fn significance_dots_and_bars_sit_at_the_documents_values() {
    let dir = TempDir::new().unwrap();
    let json = dir.path().join("sig.json");
    let doc = mine_json(
        &json,
        "2",
        &[
            "--surrogates",
            "dither:0.015",
            "--n-surrogates",
            "19",
            "--correction",
            "max-t",
        ],
    );
    // The expected rows: tested episodes by statistic, highest first (stable).
    let mut tested: Vec<&Value> = doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("statistic").is_some())
        .collect();
    tested.sort_by(|a, b| {
        b["statistic"]
            .as_f64()
            .unwrap()
            .total_cmp(&a["statistic"].as_f64().unwrap())
    });
    let top: Vec<&Value> = tested.iter().copied().take(20).collect();
    assert_eq!(top.len(), 20);
    let name = |e: &Value| {
        let labels: Vec<&str> = e["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        format!(
            "{}-{}-{}",
            labels[0],
            e["intervals"][0].as_str().unwrap(),
            labels[1]
        )
    };

    let svg_path = dir.path().join("sig.svg");
    run_ok(&["plot", "significance", s(&json), "-o", s(&svg_path)]);
    let els = elements(&std::fs::read_to_string(&svg_path).unwrap());
    let rows: Vec<&El> = texts(&els, "end");
    let names: Vec<String> = top.iter().map(|e| name(e)).collect();
    assert_eq!(
        rows.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
        names
    );
    let to_px = x_map(&x_ticks(&els));
    let row_y: Vec<f64> = rows.iter().map(|e| e.num("y")).collect();
    let at_row = |y: f64| row_y.iter().position(|&r| (r - y).abs() <= 1.0);

    // Dots: filled for significant episodes, hollow otherwise (one more of each: the legend).
    let sig = hex(significance::SIGNIFICANT);
    let not = hex(significance::NOT_SIGNIFICANT);
    let dots: Vec<&El> = els.iter().filter(|e| e.tag == "circle").collect();
    let filled = dots.iter().filter(|e| e.attr("fill") == sig).count();
    let hollow = dots
        .iter()
        .filter(|e| e.attr("fill") == "none" && e.attr("stroke") == not)
        .count();
    let n_sig = top.iter().filter(|e| e["significant"] == true).count();
    assert_eq!(filled, n_sig + 1);
    assert_eq!(hollow, 20 - n_sig + 1);
    let bar = hex(significance::SURROGATE_BAR);
    let mut seen = [false; 20];
    for d in &dots {
        let Some(r) = at_row(d.num("cy")) else {
            continue; // the legend's
        };
        let e = top[r];
        assert_eq!(
            d.attr("fill") == sig,
            e["significant"] == true,
            "{}",
            names[r]
        );
        let count = e["count"].as_f64().unwrap();
        assert!(
            (d.num("cx") - to_px(count)).abs() <= 2.0,
            "{}: dot at the count",
            names[r]
        );
        seen[r] = true;
    }
    assert!(seen.iter().all(|&s| s), "a dot per row");
    // Bars: from mean − 2 SD to mean + 2 SD on each row.
    let mut bars = 0;
    for p in els
        .iter()
        .filter(|e| e.tag == "polyline" && e.attr("stroke") == bar)
        .map(El::points)
    {
        let [(x0, y0), (x1, y1)] = p[..] else {
            continue;
        };
        if (y0 - y1).abs() > 0.5 || (x0 - x1).abs() < 0.5 {
            continue; // a cap
        }
        let Some(r) = at_row(y0) else { continue };
        let (m, sd) = (
            top[r]["surrogate_mean"].as_f64().unwrap(),
            top[r]["surrogate_std"].as_f64().unwrap(),
        );
        assert!((x0 - to_px(m - 2.0 * sd)).abs() <= 2.0, "{}", names[r]);
        assert!((x1 - to_px(m + 2.0 * sd)).abs() <= 2.0, "{}", names[r]);
        bars += 1;
    }
    assert_eq!(bars, 20);
    let p_texts = els.iter().filter(|e| e.text.starts_with("p_adj ")).count();
    assert_eq!(p_texts, 20);

    // `--top 5`; PNG with the significant colour.
    let png_path = dir.path().join("sig.png");
    run_ok(&[
        "plot",
        "significance",
        s(&json),
        "--top",
        "5",
        "-o",
        s(&png_path),
    ]);
    let (w, _, rgb) = decode(&png_path);
    assert_eq!(w, 1100);
    assert!(pixels(&rgb, significance::SIGNIFICANT) > 50);
    let svg5 = dir.path().join("sig5.svg");
    run_ok(&[
        "plot",
        "significance",
        s(&json),
        "--top",
        "5",
        "-o",
        s(&svg5),
    ]);
    let els = elements(&std::fs::read_to_string(&svg5).unwrap());
    assert_eq!(texts(&els, "end").len(), 5);
}

#[test]
fn errors_name_the_file_and_never_panic() {
    let dir = TempDir::new().unwrap();
    let input = fixture(A2929);
    let plain = dir.path().join("plain.json");
    mine_json(&plain, "2", &[]);
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "6-(10,20]ms-2 : 5\n").unwrap();
    let out = |name: &str| dir.path().join(name);

    let e = run_err(&["plot", "levels", s(&plain), "-o", s(&out("x.jpg"))]);
    assert!(e.contains("x.jpg") && e.contains(".png"), "{e}");
    let e = run_err(&["plot", "levels", s(&text), "-o", s(&out("x.png"))]);
    assert!(
        e.contains("notes.txt") && e.contains("not a `synfire mine --format json`"),
        "{e}"
    );
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "{}").unwrap();
    let e = run_err(&["plot", "levels", s(&empty), "-o", s(&out("x.png"))]);
    assert!(e.contains("empty.json") && e.contains("levels"), "{e}");
    let e = run_err(&[
        "plot",
        "levels",
        s(&out("missing.json")),
        "-o",
        s(&out("x.svg")),
    ]);
    assert!(e.contains("missing.json"), "{e}");
    let e = run_err(&["plot", "significance", s(&plain), "-o", s(&out("x.svg"))]);
    assert!(
        e.contains("plain.json") && e.contains("mine --surrogates"),
        "{e}"
    );
    let e = run_err(&["plot", "significance", s(&empty), "-o", s(&out("x.svg"))]);
    assert!(e.contains("empty.json"), "{e}");
    let e = run_err(&[
        "plot",
        "significance",
        s(&plain),
        "--top",
        "0",
        "-o",
        s(&out("x.svg")),
    ]);
    assert!(e.contains("--top"), "{e}");
    let e = run_err(&[
        "plot",
        "levels",
        s(&plain),
        "--width",
        "10",
        "-o",
        s(&out("x.svg")),
    ]);
    assert!(e.contains("width"), "{e}");

    let png = out("r.png");
    let raster = |episodes: &Path, extra: &[&str]| {
        let mut args = vec!["plot", "raster", s(&input), "--episodes", s(episodes)];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", s(&png)]);
        run_err(&args)
    };
    let unknown = dir.path().join("unknown.txt");
    std::fs::write(&unknown, "# x\n99-(10,20]ms-6 : 3\n").unwrap();
    let e = raster(&unknown, &[]);
    assert!(e.contains("unknown.txt line 2") && e.contains("99"), "{e}");
    let none = dir.path().join("none.txt");
    std::fs::write(&none, "# nothing\n6 : 19819\n").unwrap();
    let e = raster(&none, &[]);
    assert!(e.contains("none.txt") && e.contains("no episode"), "{e}");
    let e = raster(&text, &["--start-s", "5", "--end-s", "5"]);
    assert!(e.contains("--start-s"), "{e}");
    let e = raster(&text, &["--width", "320", "--height", "320"]);
    assert!(e.contains("needs at least"), "{e}");
    let e = raster(&text, &["--show-units", "nope"]);
    assert!(e.contains("nope"), "{e}");
    let e = raster(&out("absent.txt"), &[]);
    assert!(e.contains("absent.txt"), "{e}");
    let e = run_err(&[
        "plot",
        "raster",
        s(&out("absent.nwb")),
        "--episodes",
        s(&text),
        "-o",
        s(&out("r.svg")),
    ]);
    assert!(e.contains("absent.nwb"), "{e}");
}
