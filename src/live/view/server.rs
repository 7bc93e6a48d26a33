//! The live view's HTTP side: HTTP/1 (hyper) on a current-thread tokio runtime of its own
//! thread (`synfire:view`). Three routes: `GET /` the page (embedded, nothing fetched),
//! `GET /events` the frames as server-sent events, `GET /state` one snapshot as JSON.
//!
//! Each event stream is a task that sends the snapshot, then every delta numbered after it
//! from a broadcast channel of [`FRAMES`] frames, and ends after the end of the run; a client too slow for that (a stalled
//! browser, a slow link) loses frames and is sent a fresh snapshot (counted in
//! [`ViewCounters::resyncs`]). Nothing here ever waits on the pipeline, and the pipeline never
//! waits on it: the feed thread publishes with a non-blocking broadcast.
//!
//! Every request passes the [`Guard`] first (`Host`, `Origin`, the optional token), and the
//! connections are bounded, as [`crate::live::exposure`] says (at most [`exposure::MAX_CONNECTIONS`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::channel::Channel;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use parking_lot::Mutex;
use tokio::sync::broadcast;

use super::feed::{FeedState, ViewCounters};
use crate::live::exposure;
pub use crate::live::exposure::Guard;

/// Frames a slow client may fall behind by before it is sent a fresh snapshot.
pub const FRAMES: usize = 64;

/// The page (HTML, CSS and JavaScript in one file; no other resource).
const PAGE: &str = include_str!("page.html");

/// A frame for the event streams: its `seq` and the SSE text (`event: …\ndata: …\n\n`).
pub(crate) type Published = (u64, Bytes);

/// The `seq` of the frame that says the run ended (sent to every stream, whatever it has
/// seen).
pub(crate) const END_SEQ: u64 = u64::MAX;

/// What the server shares with the feed thread.
#[derive(Debug)]
pub struct Shared {
    /// The state (the feed thread holds the lock while it folds a tick in and publishes).
    pub state: Mutex<FeedState>,
    /// Frames to every open event stream.
    pub frames: broadcast::Sender<Published>,
    /// The view's counters.
    pub counters: Arc<ViewCounters>,
}

impl Shared {
    /// The SSE text of one frame.
    #[must_use]
    pub fn event(kind: &str, json: &str) -> Bytes {
        Bytes::from(format!("event: {kind}\ndata: {json}\n\n"))
    }
}

type Body = Either<Full<Bytes>, Channel<Bytes, Infallible>>;

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Either::Left(Full::new(body.into())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn handle(req: &Request<Incoming>, shared: &Arc<Shared>, guard: &Guard) -> Response<Body> {
    if let Some(why) = guard.check(req) {
        guard.refused.fetch_add(1, Ordering::Relaxed);
        return full(StatusCode::FORBIDDEN, "text/plain; charset=utf-8", why);
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return full(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "GET only\n",
        );
    }
    match req.uri().path() {
        "/" | "/index.html" => full(StatusCode::OK, "text/html; charset=utf-8", PAGE),
        "/state" => {
            let (_, json) = shared.state.lock().snapshot();
            full(StatusCode::OK, "application/json", json)
        }
        "/events" => events(shared.clone()),
        _ => full(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found; the live view is at /\n",
        ),
    }
}

/// An event stream: the snapshot, then the deltas after it, until the client goes or the
/// server stops.
fn events(shared: Arc<Shared>) -> Response<Body> {
    let (mut tx, body) = Channel::<Bytes, Infallible>::new(4);
    tokio::spawn(async move {
        shared.counters.clients.fetch_add(1, Ordering::Relaxed);
        shared.counters.clients_open.fetch_add(1, Ordering::Relaxed);
        // Subscribe before the snapshot: a delta published in between is either in the
        // snapshot (its seq is not after it, and it is skipped) or after it.
        let mut rx = shared.frames.subscribe();
        let snapshot = || {
            let state = shared.state.lock();
            let (seq, json) = state.snapshot();
            (seq, Shared::event("snapshot", &json), state.finished())
        };
        let (mut last, first, finished) = snapshot();
        let mut ok = tx
            .send_data(Bytes::from_static(b"retry: 1000\n\n"))
            .await
            .is_ok()
            && tx.send_data(first).await.is_ok();
        if finished {
            let _ = ok && tx.send_data(Shared::event("end", "{}")).await.is_ok();
            ok = false;
        }
        while ok {
            match rx.recv().await {
                Ok((seq, frame)) => {
                    if seq == END_SEQ || seq > last {
                        last = seq;
                        ok = tx.send_data(frame).await.is_ok() && seq != END_SEQ;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    shared.counters.resyncs.fetch_add(1, Ordering::Relaxed);
                    let (seq, frame, _) = snapshot();
                    last = seq;
                    ok = tx.send_data(frame).await.is_ok();
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
        shared.counters.clients_open.fetch_sub(1, Ordering::Relaxed);
    });
    let mut r = Response::new(Either::Right(body));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// Serves `listener` until `shutdown` fires (or its sender is dropped), each request through
/// `guard` ([`exposure::serve`]: bounded connections).
pub async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    guard: Guard,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    exposure::serve(
        listener,
        "Live view",
        async move {
            let _ = (&mut shutdown).await;
        },
        move |req: &Request<Incoming>| handle(req, &shared, &guard),
    )
    .await;
}
