//! Exposure of the HTTP endpoints (the live view, `/metrics`): who may read them and how many
//! connections they hold (`docs/live-view.md`, "Exposure").
//!
//! Every request passes a [`Guard`]: its `Host` header, and its `Origin` when it has one, must
//! name a loopback name ([`LOOPBACK_HOSTS`]) or a host the pipeline allows
//! (`[pipeline] ui_hosts`), so a page of another site cannot read an endpoint through DNS
//! rebinding; with `[pipeline] ui_token`, the request must carry the token
//! (`Authorization: Bearer …`, or `?token=…` for a browser's page and event stream). A refused
//! request is answered 403 and counted ([`Guard::refused`]), never logged one by one.
//! [`serve`] holds at most [`MAX_CONNECTIONS`] connections at once (the next wait in the listen
//! backlog), closes a connection that sends no complete request head within [`HEAD_TIMEOUT`],
//! and after a failing `accept` (no file descriptor left) waits [`ACCEPT_BACKOFF`], logging
//! once: never a busy loop nor a flood of log lines. `warn_if_exposed` warns when an
//! endpoint listens beyond loopback.
//!
//! A leaf of `live`: hyper and tokio only.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::header::{AUTHORIZATION, HOST, ORIGIN};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// Connections open at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 64;

/// A connection that sends no complete request head within this is closed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The wait before accepting again after `accept` failed (no file descriptor left, …).
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The host names every endpoint accepts: loopback.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Who may read the view: the hosts a request may name (`Host`, `Origin`) and the token it
/// must carry, if any.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    /// Host names accepted besides [`LOOPBACK_HOSTS`] (`[pipeline] ui_hosts`), compared
    /// without case and port.
    pub hosts: Vec<String>,
    /// The bearer token required (`[pipeline] ui_token`); `None`: none.
    pub token: Option<String>,
    /// Requests refused (403).
    pub refused: Arc<AtomicU64>,
}

impl Guard {
    /// Whether host name `name` (a `Host` header or an origin's host, port and brackets
    /// removed) is allowed.
    #[must_use]
    pub(crate) fn allows_host(&self, name: &str) -> bool {
        let name = name.trim_start_matches('[').trim_end_matches(']');
        LOOPBACK_HOSTS
            .iter()
            .copied()
            .chain(self.hosts.iter().map(String::as_str))
            .any(|h| h.eq_ignore_ascii_case(name))
    }

    /// `None` when `req` may be served, else why not.
    ///
    /// Counts nothing; the caller counts a refusal in [`Guard::refused`].
    #[must_use]
    pub(crate) fn check<B>(&self, req: &Request<B>) -> Option<&'static str> {
        let host = req
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .map(host_name);
        if !host.is_some_and(|h| self.allows_host(h)) {
            return Some("this Host is not allowed (see `[pipeline] ui_hosts`)\n");
        }
        if let Some(origin) = req.headers().get(ORIGIN) {
            let ok = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .is_some_and(|(_, rest)| self.allows_host(host_name(rest)));
            if !ok {
                return Some("this Origin is not allowed (see `[pipeline] ui_hosts`)\n");
            }
        }
        if let Some(token) = &self.token {
            let bearer = req
                .headers()
                .get(AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "));
            let query = req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
            let given = bearer.or(query);
            if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
                return Some("a token is required (`Authorization: Bearer …` or `?token=…`)\n");
            }
        }
        None
    }
}

/// The host of a `Host` header or an origin's rest (`name[:port][/…]`, `[v6][:port]`).
fn host_name(s: &str) -> &str {
    let s = s.split('/').next().unwrap_or(s);
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    s.rsplit_once(':').map_or(s, |(h, _)| h)
}

/// Equality of two byte strings in a time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Warns when endpoint `what` listens on `addr` beyond loopback (`0.0.0.0`, a LAN address).
pub(crate) fn warn_if_exposed(what: &str, addr: SocketAddr) {
    if !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "{what} listens beyond this machine: anyone who reaches this address and names an allowed host can read it (docs/live-view.md, \"Exposure\"; `[pipeline] ui_token` requires a token)."
        );
    }
}

/// Serves HTTP/1 on `listener` until `shutdown` completes: each request answered by `handle`
/// (which applies its [`Guard`]), at most [`MAX_CONNECTIONS`] connections at once, idle ones
/// closed after [`HEAD_TIMEOUT`], a failing `accept` retried after [`ACCEPT_BACKOFF`] (logged
/// once, as `what`).
pub async fn serve<B, F>(
    listener: std::net::TcpListener,
    what: &'static str,
    shutdown: impl Future<Output = ()>,
    handle: F,
) where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    F: Fn(&Request<Incoming>) -> Response<B> + Clone + Send + Sync + 'static,
{
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "{what}: cannot serve on its socket.");
            return;
        }
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut warned = false;
    tokio::pin!(shutdown);
    loop {
        // A free connection slot first: beyond MAX_CONNECTIONS, clients wait in the backlog.
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                if !warned {
                    warned = true;
                    tracing::warn!(error = %e, "{what}: accept failed; retrying every 100 ms (logged once).");
                }
                drop(permit);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handle = handle.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let r = handle(&req);
                async move { Ok::<_, Infallible>(r) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "{what}: connection ended.");
            }
        });
    }
}
