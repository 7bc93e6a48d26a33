//! Metrics: every name in one place, per-component handles, and the Prometheus exporter.
//!
//! Components register their handles once (at build time) through the structs here and never
//! call the `metrics` macros elsewhere. Without an installed recorder every handle is a no-op.
//! `synfire run --metrics ADDR` installs a Prometheus recorder whose HTTP listener runs on the
//! control-plane tokio runtime ([`install_prometheus`]).

use std::net::SocketAddr;

use metrics::{Counter, Gauge, Histogram, Unit};

/// Metric names, all prefixed `synfire_`.
pub mod names {
    /// Events (spikes, or sensor samples) accepted onto a source's ring. Label `source`.
    pub const EVENTS_IN: &str = "synfire_events_in_total";
    /// Events lost, by `source` and `reason` (`ring_full`, `publisher_gap`, `unit_limit`: a
    /// unit beyond a ZMQ source's `max_units`; `shutdown`: a stage did not take or finish
    /// their window by the shutdown deadline).
    pub const EVENTS_DROPPED: &str = "synfire_events_dropped_total";
    /// Events refused as out of range (absurd times, isolated strays ahead, a window index
    /// too large; `docs/live-windows.md`). Label `source`.
    pub const EVENTS_OUT_OF_RANGE: &str = "synfire_events_out_of_range_total";
    /// Repeats of a wire message already received, counted once and not passed on. Label
    /// `source`.
    pub const EVENTS_DUPLICATE: &str = "synfire_events_duplicate_total";
    /// Events a spike window definition refused because its open windows already held
    /// `max_open_events` (the windows they belonged to are marked incomplete). Label `window`.
    pub const WINDOW_OVERFLOW: &str = "synfire_window_overflow_total";
    /// Malformed messages, by `source` and `kind`.
    pub const MESSAGES_MALFORMED: &str = "synfire_messages_malformed_total";
    /// Times a ZMQ source saw its publisher's connection drop (the publisher went away, or
    /// sent a frame over `max_message_bytes`, which libzmq refuses before receiving it) and
    /// connected afresh. Label `source`.
    pub const PUBLISHER_DISCONNECTS: &str = "synfire_publisher_disconnects_total";
    /// Fill of a source's ring, 0..1. Label `source`.
    pub const RING_FILL: &str = "synfire_ring_fill_ratio";
    /// Events that arrived after one of their windows was emitted, rejected. Label `window`.
    pub const LATE_EVENTS: &str = "synfire_late_events_total";
    /// Event time from the end of the last window emitted to the newest event, seconds (set
    /// as events arrive; a gap or a clock jumping ahead shows here). Label `window`.
    pub const WINDOW_LAG: &str = "synfire_window_lag_seconds";
    /// Windows emitted. Label `window`.
    pub const WINDOWS: &str = "synfire_windows_total";
    /// Seconds a stage spent on one window. Label `stage`.
    pub const STAGE_SECONDS: &str = "synfire_stage_seconds";
    /// Windows a stage was not given because its queue was full (its `when_full` is
    /// `drop_newest` or `drop_oldest`), by `stage` and `reason` (`queue_full`).
    pub const STAGE_WINDOWS_DROPPED: &str = "synfire_stage_windows_dropped_total";
    /// Events of the windows in [`STAGE_WINDOWS_DROPPED`], by `stage` and `reason`.
    pub const STAGE_EVENTS_DROPPED: &str = "synfire_stage_events_dropped_total";
    /// Results written, by `sink`.
    pub const RESULTS_OUT: &str = "synfire_results_out_total";
    /// Results a sink will never write (its writes failed), by `sink`.
    pub const RESULTS_LOST: &str = "synfire_results_lost_total";
    /// Wall-clock seconds from a window's close to its result line being written (and
    /// flushed) by a sink; a pipeline that does not keep up shows here. Labels `stage`, `sink`.
    pub const RESULT_LATENCY: &str = "synfire_result_latency_seconds";
    /// Occurrences a detect stage reported. Label `stage`.
    pub const OCCURRENCES: &str = "synfire_occurrences_total";
    /// Spikes a detect stage dropped because a later spike had been processed. Label `stage`.
    pub const DETECT_LATE: &str = "synfire_detect_late_total";
    /// TTL requests of an Open Ephys TTL sink, by `sink` and `result` (`ok`, `rejected`,
    /// `timeout`, `send_error`, `dropped`: the queue was full; `stale`: older than the
    /// sink's `max_age_ms` when its turn came, never sent).
    pub const TTL_REQUESTS: &str = "synfire_ttl_requests_total";
    /// Seconds from the arrival of the spike that completed an occurrence to its TTL
    /// request's reply, the sink's queue included. Label `sink`.
    pub const TTL_LATENCY: &str = "synfire_ttl_latency_seconds";
    /// Updates the live view (`--ui`) did not take because its queue was full, by `what`
    /// (`raster`: a spike, unit name or restart; `window_line`; `occurrence`). The pipeline
    /// never waits for the view.
    pub const VIEW_DROPPED: &str = "synfire_view_updates_dropped_total";
    /// Every name above.
    pub const ALL: &[&str] = &[
        EVENTS_IN,
        EVENTS_DROPPED,
        EVENTS_OUT_OF_RANGE,
        EVENTS_DUPLICATE,
        WINDOW_OVERFLOW,
        MESSAGES_MALFORMED,
        PUBLISHER_DISCONNECTS,
        RING_FILL,
        LATE_EVENTS,
        WINDOW_LAG,
        WINDOWS,
        STAGE_SECONDS,
        STAGE_WINDOWS_DROPPED,
        STAGE_EVENTS_DROPPED,
        RESULTS_OUT,
        RESULTS_LOST,
        RESULT_LATENCY,
        OCCURRENCES,
        DETECT_LATE,
        TTL_REQUESTS,
        TTL_LATENCY,
        VIEW_DROPPED,
    ];
}

/// Registers descriptions and units of every metric with the installed recorder.
pub fn describe_all() {
    metrics::describe_counter!(
        names::EVENTS_IN,
        Unit::Count,
        "Events accepted onto a source's ring buffer."
    );
    metrics::describe_counter!(
        names::EVENTS_DROPPED,
        Unit::Count,
        "Events lost, by reason (ring_full, publisher_gap, unit_limit, shutdown)."
    );
    metrics::describe_counter!(
        names::EVENTS_OUT_OF_RANGE,
        Unit::Count,
        "Events refused as out of range (absurd times, isolated strays ahead)."
    );
    metrics::describe_counter!(
        names::EVENTS_DUPLICATE,
        Unit::Count,
        "Repeats of a wire message already received, counted once and not passed on."
    );
    metrics::describe_counter!(
        names::WINDOW_OVERFLOW,
        Unit::Count,
        "Events refused because a window definition's open windows held max_open_events."
    );
    metrics::describe_counter!(
        names::MESSAGES_MALFORMED,
        Unit::Count,
        "Malformed messages, by kind."
    );
    metrics::describe_counter!(
        names::PUBLISHER_DISCONNECTS,
        Unit::Count,
        "Publisher connections a ZMQ source saw dropped (gone, or a frame over max_message_bytes)."
    );
    metrics::describe_gauge!(
        names::RING_FILL,
        Unit::Percent,
        "Fill of a source's ring buffer, 0..1."
    );
    metrics::describe_counter!(
        names::LATE_EVENTS,
        Unit::Count,
        "Events rejected because a window they belong to was already emitted."
    );
    metrics::describe_gauge!(
        names::WINDOW_LAG,
        Unit::Seconds,
        "Event time from the end of the last emitted window to the newest event."
    );
    metrics::describe_counter!(names::WINDOWS, Unit::Count, "Windows emitted.");
    metrics::describe_histogram!(
        names::STAGE_SECONDS,
        Unit::Seconds,
        "Seconds a stage spent on one window."
    );
    metrics::describe_counter!(
        names::STAGE_WINDOWS_DROPPED,
        Unit::Count,
        "Windows a stage was not given because its queue was full (when_full = drop_newest or drop_oldest)."
    );
    metrics::describe_counter!(
        names::STAGE_EVENTS_DROPPED,
        Unit::Count,
        "Events of the windows a stage was not given because its queue was full."
    );
    metrics::describe_counter!(
        names::RESULTS_OUT,
        Unit::Count,
        "Results written by a sink."
    );
    metrics::describe_counter!(
        names::RESULTS_LOST,
        Unit::Count,
        "Results a sink will never write: its writes failed."
    );
    metrics::describe_histogram!(
        names::RESULT_LATENCY,
        Unit::Seconds,
        "Wall-clock time from a window's close to its result line being written by a sink."
    );
    metrics::describe_counter!(
        names::OCCURRENCES,
        Unit::Count,
        "Occurrences of watched episodes reported by a detect stage."
    );
    metrics::describe_counter!(
        names::DETECT_LATE,
        Unit::Count,
        "Spikes a detect stage dropped: older than a spike already processed."
    );
    metrics::describe_counter!(
        names::TTL_REQUESTS,
        Unit::Count,
        "TTL requests to the Open Ephys Network Events plugin, by result."
    );
    metrics::describe_histogram!(
        names::TTL_LATENCY,
        Unit::Seconds,
        "Wall-clock time from the arrival of the spike completing an occurrence to the reply to its TTL request, queue included."
    );
    metrics::describe_counter!(
        names::VIEW_DROPPED,
        Unit::Count,
        "Updates the live view did not take (its queue was full), by what."
    );
}

/// Handles of one source.
#[derive(Clone)]
pub struct SourceMetrics {
    source: String,
    /// [`names::EVENTS_IN`].
    pub events_in: Counter,
    /// [`names::RING_FILL`].
    pub ring_fill: Gauge,
    /// [`names::EVENTS_OUT_OF_RANGE`].
    pub out_of_range: Counter,
    /// [`names::EVENTS_DUPLICATE`].
    pub duplicate: Counter,
}

impl SourceMetrics {
    /// Registers the handles of source `source`.
    #[must_use]
    pub fn new(source: &str) -> Self {
        Self {
            source: source.to_owned(),
            events_in: metrics::counter!(names::EVENTS_IN, "source" => source.to_owned()),
            ring_fill: metrics::gauge!(names::RING_FILL, "source" => source.to_owned()),
            out_of_range: out_of_range(source),
            duplicate: metrics::counter!(names::EVENTS_DUPLICATE, "source" => source.to_owned()),
        }
    }

    /// Adds `n` to [`names::EVENTS_DROPPED`] with `reason`.
    pub fn dropped(&self, reason: &'static str, n: u64) {
        metrics::counter!(names::EVENTS_DROPPED, "source" => self.source.clone(), "reason" => reason)
            .increment(n);
    }

    /// Adds one to [`names::MESSAGES_MALFORMED`] with `kind`.
    pub fn malformed(&self, kind: &'static str) {
        metrics::counter!(names::MESSAGES_MALFORMED, "source" => self.source.clone(), "kind" => kind)
            .increment(1);
    }
}

/// Handles of one window definition.
#[derive(Clone)]
pub struct WindowMetrics {
    /// [`names::LATE_EVENTS`].
    pub late: Counter,
    /// [`names::WINDOW_LAG`].
    pub lag: Gauge,
    /// [`names::WINDOWS`].
    pub windows: Counter,
    /// [`names::WINDOW_OVERFLOW`].
    pub overflow: Counter,
    /// [`names::EVENTS_OUT_OF_RANGE`] of the window's source (a window index too large).
    pub out_of_range: Counter,
}

impl WindowMetrics {
    /// Registers the handles of window `window` over source `source`.
    #[must_use]
    pub fn new(window: &str, source: &str) -> Self {
        Self {
            late: metrics::counter!(names::LATE_EVENTS, "window" => window.to_owned()),
            lag: metrics::gauge!(names::WINDOW_LAG, "window" => window.to_owned()),
            windows: metrics::counter!(names::WINDOWS, "window" => window.to_owned()),
            overflow: metrics::counter!(names::WINDOW_OVERFLOW, "window" => window.to_owned()),
            out_of_range: out_of_range(source),
        }
    }
}

/// [`names::EVENTS_OUT_OF_RANGE`] of source `source`.
fn out_of_range(source: &str) -> Counter {
    metrics::counter!(names::EVENTS_OUT_OF_RANGE, "source" => source.to_owned())
}

/// [`names::STAGE_SECONDS`] of stage `stage`.
pub fn stage_seconds(stage: &str) -> Histogram {
    metrics::histogram!(names::STAGE_SECONDS, "stage" => stage.to_owned())
}

/// [`names::STAGE_WINDOWS_DROPPED`] and [`names::STAGE_EVENTS_DROPPED`] of stage `stage` with
/// `reason`: (windows, events).
pub fn stage_dropped(stage: &str, reason: &'static str) -> (Counter, Counter) {
    (
        metrics::counter!(names::STAGE_WINDOWS_DROPPED, "stage" => stage.to_owned(), "reason" => reason),
        metrics::counter!(names::STAGE_EVENTS_DROPPED, "stage" => stage.to_owned(), "reason" => reason),
    )
}

/// [`names::VIEW_DROPPED`] of updates of kind `what`.
pub fn view_dropped(what: &'static str) -> Counter {
    metrics::counter!(names::VIEW_DROPPED, "what" => what)
}

/// [`names::OCCURRENCES`] of detect stage `stage`.
pub fn occurrences(stage: &str) -> Counter {
    metrics::counter!(names::OCCURRENCES, "stage" => stage.to_owned())
}

/// [`names::DETECT_LATE`] of detect stage `stage`.
pub fn detect_late(stage: &str) -> Counter {
    metrics::counter!(names::DETECT_LATE, "stage" => stage.to_owned())
}

/// [`names::TTL_REQUESTS`] of sink `sink` with outcome `result`.
pub fn ttl_requests(sink: &str, result: &'static str) -> Counter {
    metrics::counter!(names::TTL_REQUESTS, "sink" => sink.to_owned(), "result" => result)
}

/// [`names::TTL_LATENCY`] of sink `sink`.
pub fn ttl_latency(sink: &str) -> Histogram {
    metrics::histogram!(names::TTL_LATENCY, "sink" => sink.to_owned())
}

/// [`names::RESULTS_OUT`] of sink `sink`.
pub fn results_out(sink: &str) -> Counter {
    metrics::counter!(names::RESULTS_OUT, "sink" => sink.to_owned())
}

/// [`names::PUBLISHER_DISCONNECTS`] of source `source`.
pub fn publisher_disconnects(source: &str) -> Counter {
    metrics::counter!(names::PUBLISHER_DISCONNECTS, "source" => source.to_owned())
}

/// [`names::RESULTS_LOST`] of sink `sink`.
pub fn results_lost(sink: &str) -> Counter {
    metrics::counter!(names::RESULTS_LOST, "sink" => sink.to_owned())
}

/// [`names::RESULT_LATENCY`] of stage `stage`'s results at sink `sink`.
pub fn result_latency(stage: &str, sink: &str) -> Histogram {
    metrics::histogram!(
        names::RESULT_LATENCY,
        "stage" => stage.to_owned(),
        "sink" => sink.to_owned()
    )
}

/// The metrics endpoint could not be started.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MetricsError(pub String);

/// The metrics endpoint's HTTP server: a future to spawn on a tokio runtime.
pub type MetricsServer = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Installs a global Prometheus recorder and binds `addr` (now, so a taken address fails the
/// run before it starts); the returned future serves `GET /metrics` there through `guard`
/// and the connection bounds of [`crate::live::exposure::serve`], and must be spawned on a
/// tokio runtime.
///
/// # Errors
/// The address cannot be bound, or a recorder is already installed.
pub fn install_prometheus(
    addr: SocketAddr,
    guard: crate::live::exposure::Guard,
) -> Result<MetricsServer, MetricsError> {
    use http_body_util::Full;
    use hyper::header::{CONTENT_TYPE, HeaderValue};
    use hyper::{Response, StatusCode};
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| MetricsError(format!("`--metrics {addr}`: cannot bind: {e}")))?;
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|e| MetricsError(format!("installing the metrics recorder: {e}")))?;
    describe_all();
    crate::live::exposure::warn_if_exposed("The metrics endpoint", addr);
    let text = |status: StatusCode, body: String| {
        let mut r = Response::new(Full::new(bytes::Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        r
    };
    let respond = move |req: &hyper::Request<hyper::body::Incoming>| {
        if let Some(why) = guard.check(req) {
            guard
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return text(StatusCode::FORBIDDEN, why.to_owned());
        }
        if req.uri().path() != "/metrics" {
            return text(
                StatusCode::NOT_FOUND,
                "metrics are at /metrics\n".to_owned(),
            );
        }
        // Upkeep (histogram buckets) at each scrape, as the exporter's own listener does.
        handle.run_upkeep();
        text(StatusCode::OK, handle.render())
    };
    Ok(Box::pin(crate::live::exposure::serve(
        listener,
        "Metrics endpoint",
        std::future::pending(),
        respond,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_prefixed_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for n in names::ALL {
            assert!(n.starts_with("synfire_"), "{n}");
            assert!(seen.insert(*n), "{n} twice");
        }
        // Every name declared in `names` is listed in `ALL` (so the checks above see it).
        let declared: Vec<&str> = include_str!("telemetry.rs")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter_map(|l| l.split('"').nth(1))
            .collect();
        assert_eq!(declared.len(), names::ALL.len(), "{declared:?}");
        for d in &declared {
            assert!(names::ALL.contains(d), "{d} is not in names::ALL");
        }
        assert!(names::ALL.contains(&"synfire_result_latency_seconds"));
        assert!(names::ALL.contains(&"synfire_window_lag_seconds"));
    }

    #[test]
    fn rendering_shows_labelled_counters_gauges_and_histograms() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            describe_all();
            let s = SourceMetrics::new("mea");
            s.events_in.increment(42);
            s.dropped("ring_full", 3);
            s.malformed("bad_json");
            s.ring_fill.set(0.25);
            let w = WindowMetrics::new("w60", "s");
            w.late.increment(2);
            w.windows.increment(1);
            w.lag.set(1.5);
            stage_seconds("episodes").record(0.5);
            results_out("stdout").increment(7);
            result_latency("episodes", "stdout").record(0.75);
        });
        let text = handle.render();
        for line in [
            "synfire_events_in_total{source=\"mea\"} 42",
            "synfire_events_dropped_total{source=\"mea\",reason=\"ring_full\"} 3",
            "synfire_messages_malformed_total{source=\"mea\",kind=\"bad_json\"} 1",
            "synfire_ring_fill_ratio{source=\"mea\"} 0.25",
            "synfire_late_events_total{window=\"w60\"} 2",
            "synfire_stage_seconds_count{stage=\"episodes\"} 1",
            "synfire_results_out_total{sink=\"stdout\"} 7",
            "synfire_window_lag_seconds{window=\"w60\"} 1.5",
            "synfire_result_latency_seconds_count{stage=\"episodes\",sink=\"stdout\"} 1",
            "synfire_result_latency_seconds_sum{stage=\"episodes\",sink=\"stdout\"} 0.75",
            "# HELP synfire_result_latency_seconds Wall-clock time from a window's close to its result line being written by a sink.",
            "# HELP synfire_window_lag_seconds Event time from the end of the last emitted window to the newest event.",
            "# HELP synfire_events_in_total Events accepted onto a source's ring buffer.",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
    }
}

/// The result latencies one sink measured for one stage: wall-clock seconds from each
/// window's close ([`crate::live::stage::Output::closed_at`]) to its line being written and flushed by the sink,
/// in write order (one per complete window's line written; lines whose write failed, previews
/// and incomplete windows are not measured). An exact collector: quantiles are of every
/// measurement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultLatency {
    /// One latency per complete window's line written, seconds, in write order.
    pub seconds: Vec<f64>,
    /// Lines written for incomplete windows ([`crate::live::stage::Output::complete`] false: emitted at the end
    /// of the input or at a restart), not measured.
    pub incomplete: usize,
}

impl ResultLatency {
    /// Lines measured.
    #[must_use]
    pub fn windows(&self) -> usize {
        self.seconds.len()
    }

    /// The `q`-quantile (nearest rank: the smallest measurement with at least `q` of them at
    /// or below it; `q` clamped to `[0, 1]`, NaN read as 0), seconds; `None` without
    /// measurements.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.seconds.is_empty() {
            return None;
        }
        let mut sorted = self.seconds.clone();
        sorted.sort_by(f64::total_cmp);
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        // `as usize` saturates; the rank is within 0..=len.
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted
            .get(rank.saturating_sub(1).min(sorted.len() - 1))
            .copied()
    }

    /// The median ([`Self::quantile`] 0.5), seconds.
    #[must_use]
    pub fn p50(&self) -> Option<f64> {
        self.quantile(0.5)
    }

    /// The 99th percentile ([`Self::quantile`] 0.99), seconds.
    #[must_use]
    pub fn p99(&self) -> Option<f64> {
        self.quantile(0.99)
    }

    /// The largest latency, seconds.
    #[must_use]
    pub fn max(&self) -> Option<f64> {
        self.seconds.iter().copied().reduce(f64::max)
    }
}
