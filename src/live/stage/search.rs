//! "When did this pattern occur before?" (`kind = "search"`): a SING index of one channel's
//! past ([`crate::search::IncrementalIndex`]) answers, for each new sensor window, its k
//! nearest earlier occurrences, exactly (z-normalised Euclidean distance), then takes the
//! window in.
//!
//! Two modes:
//! * **whole windows** (no `m`): each window of the channel is one series; the answer lists
//!   the nearest earlier windows (`window_index`, `start_sample`, `start_s`), then the window
//!   is inserted. Every window must have the length of the first.
//! * **subsequences** (`m` samples): the index holds every length-`m` subsequence of the
//!   channel seen so far; the query is the window's last `m` samples, and only subsequences
//!   that end before the query starts are searched (no trivial self-matches). The answer
//!   lists their `start_sample` and time `start_s` (on the window's clock). Samples are
//!   tracked by sample number across overlapping windows; a gap between windows restarts the
//!   history (no subsequence spans a gap).
//!
//! A window or subsequence holding a NaN (missing samples) is neither searched nor inserted;
//! the result then gives a `reason`.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{AnyStage, Samples, Stage, StageBuilder, StageConfig, StageError};
use crate::device::DeviceChoice;
use crate::live::config::section::ConfigError;
use crate::live::window::Window;
use crate::live::window::WindowConfig;
use crate::record::StreamKind;
use crate::search::collection::znormalize;
use crate::search::incremental::MIN_REBUILD;
use crate::search::{BuildOptions, IncrementalIndex, QueryOptions, SearchError};

/// `[stages.<name>]` with `kind = "search"`: exact k nearest earlier occurrences of each
/// sensor window (or of its last `m` samples) in a SING index of the channel's past.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct SearchStageConfig {
    /// The channel searched (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Subsequence length, samples: index every length-`m` subsequence and query each
    /// window's last `m` samples. Absent: whole windows are the series.
    pub m: Option<usize>,
    /// Neighbours per window (default 1).
    #[serde(default = "one")]
    pub k: usize,
    /// Where lower bounds are computed (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
    /// Series per index leaf (default 1024).
    #[serde(default = "default_leaf_capacity")]
    pub leaf_capacity: usize,
    /// Most windows or subsequences kept, newest first; older ones are dropped at rebuilds
    /// (default 1,000,000).
    #[serde(default = "default_search_capacity")]
    pub capacity: usize,
    /// Subsequences only: also query the window's subsequences ending `query_stride`,
    /// `2 × query_stride`, … samples before its end (those lying inside the window), all in
    /// one batch ([`crate::search::Searcher::query_batch`]; on a GPU the batched filter and
    /// refine). Every query of the window then searches the subsequences that end before the
    /// window's earliest query starts (none overlaps any query of the window). Absent: the
    /// last `m` samples alone.
    #[serde(default)]
    pub query_stride: Option<usize>,
}

fn one() -> usize {
    1
}

fn default_leaf_capacity() -> usize {
    BuildOptions::default().leaf_capacity
}

fn default_search_capacity() -> usize {
    1_000_000
}

impl StageConfig for SearchStageConfig {
    const KIND: &'static str = "search";
    const INPUT: StreamKind = StreamKind::Sensor;

    fn validate(&self, window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        let mut errors = Vec::new();
        for (f, v) in [
            ("k", self.k),
            ("leaf_capacity", self.leaf_capacity),
            ("capacity", self.capacity),
        ] {
            if v == 0 {
                errors.push(ConfigError::new(f, "must be at least 1"));
            }
        }
        if self.m == Some(0) {
            errors.push(ConfigError::new("m", "must be at least 1"));
        }
        match (self.query_stride, self.m) {
            (Some(0), _) => errors.push(ConfigError::new("query_stride", "must be at least 1")),
            (Some(_), None) => errors.push(ConfigError::new(
                "query_stride",
                "needs `m` (it queries subsequences of the window)",
            )),
            _ => {}
        }
        if let (Some(m), Some(len)) = (self.m, window.length_samples)
            && m as u64 > len
        {
            errors.push(ConfigError::new(
                "m",
                format!(
                    "m = {m} is longer than window `{}` ({len} samples)",
                    window.name
                ),
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Box::new(self.clone()))
    }
}

impl StageBuilder for SearchStageConfig {
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        Ok(Box::new(SearchStage::new(self.clone())))
    }
}

/// What the search stage's index holds (the result's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Whole windows (no `m`): each window of the channel is one series.
    Windows,
    /// Every length-`m` subsequence of the channel seen so far.
    Subsequences,
}

/// One sensor window's result (`kind = "search"`). A window that could not be searched (see
/// the module doc) gives a `reason` and no `neighbors` (nor `query_start_sample`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchWindowResult {
    /// The channel searched (0-based).
    pub channel: usize,
    /// Neighbours asked for per window.
    pub k: usize,
    /// Where lower bounds are computed: `"cpu"` or `"gpu"`.
    pub device: String,
    /// Whole windows or subsequences.
    pub mode: SearchMode,
    /// Subsequences: their length, samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<usize>,
    /// Why the window was not searched (NaN samples, a length unlike the first window's, fewer
    /// than `m` samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Subsequences: stream sample number of the query's first sample (the window's last
    /// `m` samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_start_sample: Option<u64>,
    /// Up to `k` nearest earlier windows or subsequences, nearest first (empty before anything
    /// was indexed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbors: Option<Vec<SearchNeighbor>>,
    /// With `query_stride`: every query of the window, earliest first (the last is the one
    /// `query_start_sample` and `neighbors` give).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queries: Option<Vec<SearchQuery>>,
    /// With `query_stride`: the window's queries left out because they hold a NaN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_queries: Option<usize>,
    /// Windows or subsequences held by the index after this window.
    pub indexed: usize,
}

/// One query of a window (`query_stride`) and its nearest earlier subsequences.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchQuery {
    /// Stream sample number of the query's first sample.
    pub start_sample: u64,
    /// Its start, seconds (on the window's clock).
    pub start_s: f64,
    /// Up to `k` nearest earlier subsequences, nearest first.
    pub neighbors: Vec<SearchNeighbor>,
}

/// One earlier occurrence found for a window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchNeighbor {
    /// Whole windows: the earlier window's index `k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_index: Option<u64>,
    /// Stream sample number of its first sample.
    pub start_sample: u64,
    /// Its start, seconds (subsequences: on the current window's clock).
    pub start_s: f64,
    /// z-normalised Euclidean distance to the window (or query).
    pub distance: f64,
}

/// The search stage.
#[derive(Debug)]
pub struct SearchStage {
    opts: SearchStageConfig,
    device: DeviceChoice,
    index: Option<IncrementalIndex>,
    /// Whole windows: (window index, start sample, start s) of the windows inserted, oldest
    /// first.
    windows: VecDeque<(u64, u64, f64)>,
    /// Subsequences: the known samples, the first at sample number `history_start`.
    history: Vec<f64>,
    history_start: u64,
    /// Subsequences: the next start sample to insert.
    next_insert: u64,
}

fn search_error(e: SearchError) -> StageError {
    match e {
        SearchError::Device(d) => StageError::Device(d),
        other => StageError::Config(other.to_string()),
    }
}

impl SearchStage {
    /// A stage with `opts`. Without a usable GPU, `DeviceChoice::Auto` becomes the CPU here
    /// ([`DeviceChoice::settle`]); with one it stays `Auto` (a GPU failure then falls back to
    /// the CPU for that query, still exact, instead of failing the window).
    #[must_use]
    pub fn new(opts: SearchStageConfig) -> Self {
        let device = opts.device.settle("the search stage");
        Self {
            opts,
            device,
            index: None,
            windows: VecDeque::new(),
            history: Vec::new(),
            history_start: 0,
            next_insert: 0,
        }
    }

    fn index_mut(&mut self, len: usize) -> Result<&mut IncrementalIndex, StageError> {
        if self.index.is_none() {
            let options = BuildOptions {
                leaf_capacity: self.opts.leaf_capacity,
            };
            self.index = Some(
                IncrementalIndex::new(len, options, self.opts.capacity).map_err(search_error)?,
            );
        }
        self.index
            .as_mut()
            .ok_or_else(|| StageError::Config("the search index is missing".into()))
    }

    /// The k nearest held series of `z` (empty before anything was inserted).
    fn knn(&self, z: &[f32]) -> Result<Vec<(u64, f64)>, StageError> {
        match self.index.as_ref().filter(|i| !i.is_empty()) {
            None => Ok(Vec::new()),
            Some(index) => {
                let (n, _) = index
                    .knn(z, self.opts.k, self.device, QueryOptions::default())
                    .map_err(search_error)?;
                Ok(n.iter().map(|n| (n.id, n.distance)).collect())
            }
        }
    }

    fn whole(
        &mut self,
        w: &Window,
        start_sample: u64,
        x: &[f64],
        out: &mut SearchWindowResult,
    ) -> Result<(), StageError> {
        if x.is_empty() || x.iter().any(|v| !v.is_finite()) {
            out.reason = Some("the window is empty or has missing (NaN) samples".into());
            return Ok(());
        }
        if let Some(index) = &self.index
            && index.len() != x.len()
        {
            out.reason = Some(format!(
                "the window has {} samples, the first had {}",
                x.len(),
                index.len()
            ));
            return Ok(());
        }
        let z = znormalize(x);
        let neighbors = self
            .knn(&z)?
            .into_iter()
            .filter_map(|(id, d)| {
                let at = self.windows.partition_point(|e| e.0 < id);
                self.windows
                    .get(at)
                    .filter(|e| e.0 == id)
                    .map(|&(wi, ss, s)| SearchNeighbor {
                        window_index: Some(wi),
                        start_sample: ss,
                        start_s: s,
                        distance: d,
                    })
            })
            .collect();
        out.neighbors = Some(neighbors);
        self.index_mut(x.len())?
            .insert(w.index, &z)
            .map_err(search_error)?;
        self.windows.push_back((w.index, start_sample, w.start_s));
        let keep = self
            .opts
            .capacity
            .saturating_add(self.opts.capacity / 4 + MIN_REBUILD);
        while self.windows.len() > keep {
            self.windows.pop_front();
        }
        Ok(())
    }

    /// Inserts the subsequences starting at `next_insert..=last` (those the history holds
    /// whole and without NaN), then forgets the samples no later subsequence needs.
    fn insert_until(&mut self, last: u64, m: usize) -> Result<(), StageError> {
        let mut p = self.next_insert.max(self.history_start);
        let held_end = self.history_start + self.history.len() as u64;
        while p <= last && p + m as u64 <= held_end {
            let off = (p - self.history_start) as usize;
            let sub = &self.history[off..off + m];
            if sub.iter().all(|v| v.is_finite()) {
                let z = znormalize(sub);
                self.index_mut(m)?.insert(p, &z).map_err(search_error)?;
            }
            p += 1;
        }
        self.next_insert = self.next_insert.max(p);
        let drop =
            (self.next_insert.saturating_sub(self.history_start) as usize).min(self.history.len());
        self.history.drain(..drop);
        self.history_start += drop as u64;
        Ok(())
    }

    fn subsequences(
        &mut self,
        w: &Window,
        s: &Samples<'_>,
        x: &[f64],
        m: usize,
        out: &mut SearchWindowResult,
    ) -> Result<(), StageError> {
        let start = s.start_sample;
        let end = start + x.len() as u64;
        // Extend the known samples (or restart them after a gap).
        let known_end = self.history_start + self.history.len() as u64;
        if self.history.is_empty() || start > known_end {
            // A gap: every subsequence of the old run is earlier than any later query.
            self.insert_until(known_end.saturating_sub(m as u64), m)?;
            self.history.clear();
            self.history.extend_from_slice(x);
            self.history_start = start;
            self.next_insert = self.next_insert.max(start);
        } else if end > known_end {
            let from = (known_end - start) as usize;
            self.history.extend_from_slice(&x[from..]);
        }
        if x.len() < m {
            out.reason = Some(format!(
                "the window has {} samples, fewer than m = {m}",
                x.len()
            ));
            return Ok(());
        }
        // Insert every subsequence that ends before the query (the last m samples) starts.
        let query_start = end - m as u64;
        if let Some(stride) = self.opts.query_stride {
            return self.batch(w, s, x, m, stride, out);
        }
        if let Some(last) = query_start.checked_sub(m as u64) {
            self.insert_until(last, m)?;
        }
        let q = &x[x.len() - m..];
        if q.iter().any(|v| !v.is_finite()) {
            out.reason = Some("the query has missing (NaN) samples".into());
            return Ok(());
        }
        let rate = s.rate_hz;
        let neighbors = self
            .knn(&znormalize(q))?
            .into_iter()
            .map(|(p, d)| SearchNeighbor {
                window_index: None,
                start_sample: p,
                start_s: w.start_s + (p as f64 - start as f64) / rate,
                distance: d,
            })
            .collect();
        out.query_start_sample = Some(query_start);
        out.neighbors = Some(neighbors);
        Ok(())
    }
}

impl SearchStage {
    /// `query_stride`: the window's subsequences ending at its end, `stride`, `2 × stride`, …
    /// samples before it, answered in one batch against the subsequences ending before the
    /// earliest of them starts.
    fn batch(
        &mut self,
        w: &Window,
        s: &Samples<'_>,
        x: &[f64],
        m: usize,
        stride: usize,
        out: &mut SearchWindowResult,
    ) -> Result<(), StageError> {
        let start = s.start_sample;
        let mut offsets = vec![x.len() - m];
        while let Some(o) = offsets.last().and_then(|o| o.checked_sub(stride)) {
            offsets.push(o);
        }
        offsets.reverse();
        let earliest = start + offsets[0] as u64;
        if let Some(last) = earliest.checked_sub(m as u64) {
            self.insert_until(last, m)?;
        }
        let (mut starts, mut qs) = (Vec::new(), Vec::new());
        for &o in &offsets {
            let q = &x[o..o + m];
            if q.iter().all(|v| v.is_finite()) {
                starts.push(start + o as u64);
                qs.push(znormalize(q));
            }
        }
        let skipped = offsets.len() - qs.len();
        let answers = match self.index.as_ref().filter(|i| !i.is_empty()) {
            None => vec![Vec::new(); qs.len()],
            Some(index) => index
                .knn_batch(&qs, self.opts.k, self.device, QueryOptions::default())
                .map_err(search_error)?
                .into_iter()
                .map(|(n, _)| n)
                .collect(),
        };
        let rate = s.rate_hz;
        let at = |p: u64| w.start_s + (p as f64 - start as f64) / rate;
        let queries: Vec<SearchQuery> = starts
            .iter()
            .zip(answers)
            .map(|(&p, ns)| SearchQuery {
                start_sample: p,
                start_s: at(p),
                neighbors: ns
                    .into_iter()
                    .map(|n| SearchNeighbor {
                        window_index: None,
                        start_sample: n.id,
                        start_s: at(n.id),
                        distance: n.distance,
                    })
                    .collect(),
            })
            .collect();
        let last_start = start + (x.len() - m) as u64;
        if let Some(last) = queries.last().filter(|q| q.start_sample == last_start) {
            out.query_start_sample = Some(last.start_sample);
            out.neighbors = Some(last.neighbors.clone());
        } else {
            out.reason = Some("the query has missing (NaN) samples".into());
        }
        out.queries = Some(queries);
        out.skipped_queries = Some(skipped);
        Ok(())
    }
}

impl Stage for SearchStage {
    type Result = SearchWindowResult;

    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Searches the window (or its last `m` samples), then indexes it
    /// ([`SearchWindowResult`]; see the module doc).
    fn process(&mut self, window: &Window) -> Result<SearchWindowResult, StageError> {
        let samples = Samples::of(window)?;
        let x = samples.configured_channel(self.opts.channel)?;
        let mut out = SearchWindowResult {
            channel: self.opts.channel,
            k: self.opts.k,
            device: if self.device != DeviceChoice::Cpu {
                "gpu"
            } else {
                "cpu"
            }
            .to_owned(),
            mode: SearchMode::Windows,
            m: None,
            reason: None,
            query_start_sample: None,
            neighbors: None,
            queries: None,
            skipped_queries: None,
            indexed: 0,
        };
        match self.opts.m {
            None => self.whole(window, samples.start_sample, &x, &mut out)?,
            Some(m) => {
                out.mode = SearchMode::Subsequences;
                out.m = Some(m);
                self.subsequences(window, &samples, &x, m, &mut out)?;
            }
        }
        out.indexed = self.index.as_ref().map_or(0, IncrementalIndex::count);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::window::WindowData;
    use crate::search::brute::knn_rows;
    use std::sync::Arc;
    use std::time::Instant;

    fn window(index: u64, start_sample: u64, values: Vec<f64>) -> Window {
        Window {
            window: Arc::from("w"),
            source: Arc::from("s"),
            index,
            start_s: start_sample as f64 / 100.0,
            end_s: (start_sample as f64 + values.len() as f64) / 100.0,
            complete: true,
            preview: false,
            late: 0,
            dropped: 0,
            out_of_range: 0,
            duplicate: 0,
            overflow: 0,
            gap: None,
            epoch: 0,
            run_id: Arc::from(""),
            closed_at: Instant::now(),
            data: WindowData::Samples {
                channels: 1,
                values,
                rate_hz: 100.0,
                start_sample,
            },
        }
    }

    fn opts(m: Option<usize>, k: usize) -> SearchStageConfig {
        SearchStageConfig {
            channel: 0,
            m,
            k,
            device: DeviceChoice::Cpu,
            leaf_capacity: 8,
            capacity: usize::MAX,
            query_stride: None,
        }
    }

    #[test]
    fn whole_windows_find_the_nearest_earlier_windows() {
        let mut stage = SearchStage::new(opts(None, 2));
        let mut held: Vec<Vec<f32>> = Vec::new();
        for i in 0..1500u64 {
            // Every 10th window repeats window i / 10 (scaled): an exact earlier match.
            let v = if i % 10 == 9 {
                crate::synth::random_walk(50, i / 10)
                    .iter()
                    .map(|x| 3.0 * x - 1.0)
                    .collect()
            } else {
                crate::synth::random_walk(50, i)
            };
            let out = stage.process(&window(i, i * 50, v.clone())).unwrap();
            assert_eq!(out.mode, SearchMode::Windows);
            let got = out.neighbors.as_ref().unwrap();
            if !held.is_empty() {
                let z = znormalize(&v);
                let ids: Vec<u32> = (0..held.len() as u32).collect();
                let want = knn_rows(&held.concat(), &ids, 50, &z, 2).unwrap().neighbors;
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.window_index, Some(u64::from(w.id)), "window {i}");
                    assert_eq!(g.start_sample, u64::from(w.id) * 50);
                    assert_eq!(g.distance, w.distance);
                }
                if i % 10 == 9 && (i / 10) % 10 != 9 {
                    assert_eq!(got[0].distance, 0.0);
                }
            } else {
                assert!(got.is_empty());
            }
            held.push(znormalize(&v));
            assert_eq!(out.indexed, held.len());
        }
        // A window of another length or with a NaN is reported, not inserted.
        let out = stage.process(&window(2000, 0, vec![1.0; 7])).unwrap();
        assert!(out.reason.unwrap().contains("first had 50"));
        assert!(out.neighbors.is_none());
        let mut nan = crate::synth::random_walk(50, 3);
        nan[4] = f64::NAN;
        let out = stage.process(&window(2001, 0, nan)).unwrap();
        assert!(out.reason.unwrap().contains("NaN"));
        assert!(out.neighbors.is_none());
        assert_eq!(out.indexed, 1500);
    }

    #[test]
    fn strided_queries_equal_brute_force_over_what_precedes_the_earliest_query() {
        let m = 16;
        let x = crate::synth::random_walk(4000, 12);
        let mut stage = SearchStage::new(SearchStageConfig {
            query_stride: Some(7),
            ..opts(Some(m), 2)
        });
        let mut x_nan = x.clone();
        x_nan[3010] = f64::NAN;
        for n in 0..40u64 {
            let s = n * 75;
            let v = x_nan[s as usize..s as usize + 120].to_vec();
            let out = stage.process(&window(n, s, v)).unwrap();
            let queries = out.queries.as_ref().unwrap();
            // Queries end at the window's end, 7, 14, … samples before, inside the window.
            let want_starts: Vec<u64> = (0..=(120 - m) / 7)
                .rev()
                .map(|j| s + 120 - m as u64 - 7 * j as u64)
                .filter(|&p| !(p..p + m as u64).contains(&3010))
                .collect();
            let got_starts: Vec<u64> = queries.iter().map(|q| q.start_sample).collect();
            assert_eq!(got_starts, want_starts, "window {n}");
            let skipped = (120 - m) / 7 + 1 - want_starts.len();
            assert_eq!(out.skipped_queries, Some(skipped));
            // The oracle: every NaN-free subsequence ending before the earliest query starts.
            let earliest = s + (120 - m as u64) % 7;
            let ids: Vec<u32> = (0..(earliest + 1).saturating_sub(m as u64))
                .filter(|&p| !(p..p + m as u64).contains(&3010))
                .map(|p| p as u32)
                .collect();
            let rows: Vec<f32> = ids
                .iter()
                .flat_map(|&p| znormalize(&x[p as usize..p as usize + m]))
                .collect();
            for q in queries {
                if ids.is_empty() {
                    assert!(q.neighbors.is_empty());
                    continue;
                }
                let z = znormalize(&x[q.start_sample as usize..q.start_sample as usize + m]);
                let want = knn_rows(&rows, &ids, m, &z, 2).unwrap().neighbors;
                let got: Vec<(u64, f64)> = q
                    .neighbors
                    .iter()
                    .map(|n| (n.start_sample, n.distance))
                    .collect();
                let want: Vec<(u64, f64)> =
                    want.iter().map(|n| (u64::from(n.id), n.distance)).collect();
                assert_eq!(got, want, "window {n} query {}", q.start_sample);
            }
            if want_starts.last() == Some(&(s + 120 - m as u64)) {
                assert_eq!(out.neighbors.as_ref(), queries.last().map(|q| &q.neighbors));
            } else {
                assert!(out.reason.is_some());
            }
        }
    }

    #[test]
    fn query_stride_needs_m_and_a_positive_stride() {
        let w = WindowConfig {
            name: "w".into(),
            source: "s".into(),
            length_s: None,
            hop_s: None,
            allowed_lateness_s: None,
            max_open_events: None,
            length_samples: Some(100),
            hop_samples: Some(50),
        };
        let fields = |c: SearchStageConfig| -> Vec<String> {
            match c.validate(&w) {
                Ok(_) => Vec::new(),
                Err(e) => e
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect(),
            }
        };
        let none = fields(SearchStageConfig {
            query_stride: Some(5),
            ..opts(None, 1)
        });
        assert!(
            none.iter()
                .any(|e| e.contains("query_stride") && e.contains("needs `m`")),
            "{none:?}"
        );
        let zero = fields(SearchStageConfig {
            query_stride: Some(0),
            ..opts(Some(10), 1)
        });
        assert!(zero.iter().any(|e| e.contains("query_stride")), "{zero:?}");
        assert!(
            fields(SearchStageConfig {
                query_stride: Some(3),
                ..opts(Some(10), 1)
            })
            .is_empty()
        );
    }

    #[test]
    fn subsequences_search_everything_before_the_query_across_gaps() {
        let m = 20;
        let x = crate::synth::random_walk(3000, 9);
        let mut stage = SearchStage::new(opts(Some(m), 3));
        // Windows of 100 every 60 samples, then a gap of 500 samples.
        let mut starts: Vec<u64> = (0..20).map(|i| i * 60).collect();
        starts.extend((0..20).map(|i| 1700 + i * 60));
        for (n, &s) in starts.iter().enumerate() {
            let v = x[s as usize..s as usize + 100].to_vec();
            let out = stage.process(&window(n as u64, s, v)).unwrap();
            assert_eq!((out.mode, out.m), (SearchMode::Subsequences, Some(m)));
            let q0 = out.query_start_sample.unwrap();
            assert_eq!(q0, s + 100 - m as u64);
            // The oracle: subsequences ending by q0 within the current run, and after the
            // gap every subsequence of the first run (samples 0..1240).
            let mut ids: Vec<u32> = Vec::new();
            if s >= 1700 {
                ids.extend((0..=1240 - m as u32).collect::<Vec<u32>>());
                ids.extend((1700..q0.saturating_sub(m as u64) + 1).map(|p| p as u32));
            } else {
                ids.extend((0..(q0 + 1).saturating_sub(m as u64)).map(|p| p as u32));
            }
            let got = out.neighbors.as_ref().unwrap();
            if ids.is_empty() {
                assert!(got.is_empty());
                continue;
            }
            let rows: Vec<f32> = ids
                .iter()
                .flat_map(|&p| znormalize(&x[p as usize..p as usize + m]))
                .collect();
            let q = znormalize(&x[q0 as usize..q0 as usize + m]);
            let want = knn_rows(&rows, &ids, m, &q, 3).unwrap().neighbors;
            assert_eq!(got.len(), want.len(), "window {n}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.start_sample, u64::from(w.id), "window {n}");
                assert_eq!(g.window_index, None);
                assert_eq!(g.distance, w.distance);
                assert!((g.start_s - f64::from(w.id) / 100.0).abs() < 1e-9);
            }
        }
    }
}
