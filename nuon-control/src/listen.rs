//! Serving a listener under limits a slow or silent client cannot outlast.
//!
//! `axum::serve` holds a connection for as long as its peer keeps it open:
//! a client that opens a connection and sends nothing, or sends a request
//! head a byte a minute, holds a task and a file descriptor for ever, and a
//! thousand of them hold the port (slowloris). Here each connection has a
//! watchdog that closes it when it has no request in flight for longer than
//! its limit: [`ConnLimits::header_timeout`] until its first request's head
//! arrives, [`ConnLimits::idle_timeout`] between requests. A request in
//! flight (a runner's long poll, a log being followed) is never cut: the
//! connection is busy until the response body has been sent. Past
//! [`ConnLimits::max_connections`], a new connection closes the one that
//! has waited longest without a request in flight (nginx's `limit_conn`
//! refuses the newcomer instead, which lets a flood lock real clients out).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::tls::Tls;

/// How long connections may wait, and how many are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// The longest a new connection may take to send its first request's
    /// head (nginx's `client_header_timeout`; default 10 s).
    pub header_timeout: Duration,
    /// The longest a connection may stay open with no request in flight
    /// after its first (nginx's `keepalive_timeout`; default 75 s).
    pub idle_timeout: Duration,
    /// The most connections held open on one listener (default 16,384).
    /// A new one past the cap closes the one idle longest, or is closed
    /// itself when every one has a request in flight.
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            max_connections: 16_384,
        }
    }
}

/// One connection as the table sees it.
struct Conn {
    /// Requests whose response has not been sent in full.
    busy: AtomicUsize,
    /// Whether a request has started on it (then the idle timeout applies).
    served: AtomicBool,
    /// When it last became idle (or was accepted).
    since: Mutex<Instant>,
    /// Told to close (evicted at the cap).
    close: Notify,
}

impl Conn {
    fn idle_since(&self) -> Option<Instant> {
        (self.busy.load(Ordering::Acquire) == 0).then(|| *self.since.lock().expect("conn lock"))
    }
}

/// A request in flight: the connection is busy until this is dropped
/// (with the response body, once sent).
struct Busy(Arc<Conn>);

impl Busy {
    fn start(conn: &Arc<Conn>) -> Busy {
        conn.served.store(true, Ordering::Release);
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Busy(conn.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // The clock is set before the count falls, so a watchdog that sees
        // zero also sees when.
        *self.0.since.lock().expect("conn lock") = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its connection busy until it is sent.
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The open connections of one listener.
#[derive(Default)]
struct Table {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

impl Table {
    /// Registers a new connection. At the cap, first closes the one idle
    /// longest; `None` when every one is busy (the newcomer is refused).
    fn admit(&self, max: usize) -> Option<(u64, Arc<Conn>)> {
        let mut conns = self.conns.lock().expect("conn table lock");
        if conns.len() >= max {
            let victim = conns
                .iter()
                .filter_map(|(id, c)| c.idle_since().map(|at| (at, *id)))
                .min()
                .map(|(_, id)| id)?;
            if let Some(c) = conns.remove(&victim) {
                c.close.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            since: Mutex::new(Instant::now()),
            close: Notify::new(),
        });
        conns.insert(id, conn.clone());
        Some((id, conn))
    }

    fn remove(&self, id: u64) {
        self.conns.lock().expect("conn table lock").remove(&id);
    }
}

/// Resolves when `conn` has had no request in flight for its limit.
async fn idle_out(conn: &Conn, limits: ConnLimits) {
    loop {
        let limit = if conn.served.load(Ordering::Acquire) {
            limits.idle_timeout
        } else {
            limits.header_timeout
        };
        match conn.idle_since() {
            Some(at) if at + limit <= Instant::now() => return,
            Some(at) => tokio::time::sleep_until(at + limit).await,
            // Busy: look again when the limit could first have passed.
            None => tokio::time::sleep(limit).await,
        }
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` resolves,
/// then lets requests in flight finish (the caller ends long polls).
/// Requests carry the peer's address as [`ConnectInfo`]. With `tls`, every
/// connection is TLS (its handshake within the header timeout) and its
/// requests carry `x-forwarded-proto: https`, as behind a TLS proxy.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let table = Arc::new(Table::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    // Each connection task holds a receiver: all have ended when `closed`.
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, addr) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or memory: give what holds them
                    // a moment instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some((id, conn)) = table.admit(limits.max_connections.max(1)) else {
            tracing::warn!(
                peer = %addr,
                max = limits.max_connections,
                "every connection is busy: closed a new one (raise --max-connections)"
            );
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let task = Connection {
            peer: addr,
            router: router.clone(),
            conn,
            limits,
            stop: stop_rx.clone(),
            _done: done_rx.clone(),
            slot: (table.clone(), id),
        };
        match &tls {
            None => tokio::spawn(task.serve(stream, false)),
            Some(tls) => {
                let tls = tls.clone();
                tokio::spawn(async move {
                    // The whole handshake within one header timeout, and
                    // given up at once when evicted or stopping.
                    let mut stop = task.stop.clone();
                    let accepted = tokio::select! {
                        s = tokio::time::timeout(
                            limits.header_timeout,
                            tls.accept(stream, addr),
                        ) => s.unwrap_or_else(|_| {
                            tracing::debug!(peer = %addr, "TLS handshake not finished within the header timeout");
                            None
                        }),
                        _ = task.conn.close.notified() => None,
                        _ = stop.wait_for(|s| *s) => None,
                    };
                    match accepted {
                        Some(stream) => {
                            // Its wait for a first request starts now.
                            *task.conn.since.lock().expect("conn lock") = Instant::now();
                            task.serve(stream, true).await
                        }
                        None => task.slot.0.remove(task.slot.1),
                    }
                })
            }
        };
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

/// One accepted connection and what serving it needs.
struct Connection {
    peer: SocketAddr,
    router: Router,
    conn: Arc<Conn>,
    limits: ConnLimits,
    stop: watch::Receiver<bool>,
    /// Held until the connection ends: the listener waits for all of them.
    _done: watch::Receiver<()>,
    slot: (Arc<Table>, u64),
}

impl Connection {
    /// Serves HTTP/1 or HTTP/2 on `stream` (over TLS when `https`) until
    /// the peer leaves, the connection idles out or is evicted, or the
    /// listener stops.
    async fn serve<S>(self, stream: S, https: bool)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            peer: addr,
            router,
            conn,
            limits,
            mut stop,
            _done,
            slot: (table, id),
        } = self;
        let service = {
            let conn = conn.clone();
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let busy = Busy::start(&conn);
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(ConnectInfo(addr));
                if https {
                    // What a TLS proxy in front would say; a client's own
                    // claim is not taken.
                    req.headers_mut().insert(
                        "x-forwarded-proto",
                        axum::http::HeaderValue::from_static("https"),
                    );
                }
                let mut router = router.clone();
                async move {
                    let resp = tower_service::Service::call(&mut router, req).await?;
                    Ok::<_, Infallible>(resp.map(|inner| Tracked { inner, _busy: busy }))
                }
            })
        };
        let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        let served = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let mut served = std::pin::pin!(served);
        let mut stopping = false;
        loop {
            tokio::select! {
                result = served.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!(peer = %addr, error = %e, "connection ended");
                    }
                    break;
                }
                _ = idle_out(&conn, limits) => {
                    tracing::debug!(peer = %addr, "closed a connection with no request in flight past its timeout");
                    break;
                }
                _ = conn.close.notified() => {
                    tracing::debug!(peer = %addr, "closed an idle connection for a new one (at --max-connections)");
                    break;
                }
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    served.as_mut().graceful_shutdown();
                }
            }
        }
        table.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_millis(100),
            idle_timeout: Duration::from_millis(300),
            max_connections: 8,
        }
    }

    #[tokio::test]
    async fn a_silent_connection_times_out_on_the_header_limit_then_on_the_idle_one() {
        let table = Table::default();
        let (_, conn) = table.admit(8).unwrap();
        let start = Instant::now();
        idle_out(&conn, limits()).await;
        let waited = start.elapsed();
        assert!(
            (Duration::from_millis(100)..Duration::from_millis(290)).contains(&waited),
            "{waited:?}"
        );

        let busy = Busy::start(&conn);
        let long_request = tokio::time::sleep(Duration::from_millis(700));
        tokio::select! {
            _ = idle_out(&conn, limits()) => panic!("a connection with a request in flight timed out"),
            _ = long_request => {}
        }
        drop(busy);
        let idle = Instant::now();
        idle_out(&conn, limits()).await;
        let waited = idle.elapsed();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
    }

    #[tokio::test]
    async fn at_the_cap_the_connection_idle_longest_makes_room() {
        let table = Table::default();
        let (_, oldest) = table.admit(2).unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let (_, busy) = table.admit(2).unwrap();
        let _in_flight = Busy::start(&busy);
        // The busy one is older than its request, but it has one in flight.
        let (_, _newest) = table.admit(2).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), oldest.close.notified())
                .await
                .is_ok(),
            "the idle connection was not told to close"
        );
        assert_eq!(table.conns.lock().unwrap().len(), 2);

        // All busy: the newcomer is refused, nobody is closed.
        let table = Table::default();
        let (_, a) = table.admit(1).unwrap();
        let _b = Busy::start(&a);
        assert!(table.admit(1).is_none());
        assert_eq!(table.conns.lock().unwrap().len(), 1);
    }
}
