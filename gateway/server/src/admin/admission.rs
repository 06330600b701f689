//! Who gets the admin API's connections, and who waits. Connections are
//! bounded (descriptors are finite), so a client that opens many and sends
//! nothing must not lock out the probes:
//!
//! - Only a connection whose request bytes arrived asks for a place (the
//!   [`Lobby`](super::lobby::Lobby) holds the others).
//! - A connection with no request in flight and nothing unread (idle
//!   keep-alive) for [`IDLE_GRACE`] is closed, the longest idle first, when
//!   a new one needs its place. One whose request waits to be read is never
//!   taken for idle.
//! - Requests without a token (probes aside) may hold only part of the
//!   connections at once; past that they are answered 503 at once, so the
//!   rest stays free for probes and for clients with a token.
//! - A connection whose client stops reading (a capture download nobody
//!   reads) is cut once its writes have waited [`Limits::stall`] for room;
//!   sooner, after [`PRESSURE_STALL`], when a new connection needs its place
//!   and no request of its in flight carries a token (requests pipelined
//!   and never read, `/metrics` among them, held every place).

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::error::ApiError;
use super::tokens::Tokens;

/// How long a connection without a request in flight is spared after it
/// was placed or answered, before another may take its place.
const IDLE_GRACE: Duration = Duration::from_millis(20);
/// How long a connection's writes have waited for a client that takes no
/// bytes before its place may go to a new connection (none of its requests
/// in flight carrying a token).
const PRESSURE_STALL: Duration = Duration::from_millis(200);

/// The admission limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// Requests without a token (probes aside) in flight at once.
    pub anonymous: usize,
    /// How long a write may wait for the client to take bytes.
    pub stall: Duration,
    /// Accepted connections waiting for their first request bytes.
    pub waiting: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { connections: 128, anonymous: 96, stall: Duration::from_secs(30), waiting: 256 }
    }
}

/// The admission state of one admin server.
#[derive(Debug)]
pub(super) struct Admission {
    limits: Limits,
    tokens: Tokens,
    slots: Arc<Semaphore>,
    /// Open connections, by id.
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    anonymous: AtomicUsize,
    /// The clock every connection's times count from, so idle times compare.
    epoch: Instant,
}

/// One open connection, as admission sees it.
#[derive(Debug)]
pub(super) struct Connection {
    /// Requests being handled or answered, and of those, the ones with a token.
    in_flight: AtomicUsize,
    tokened_in_flight: AtomicUsize,
    /// Told to close to make room (see [`PRESSURE_STALL`]).
    evicted: std::sync::atomic::AtomicBool,
    /// Since when a write has waited for the client to take bytes (ms
    /// since the admission's epoch, plus one; 0: none waits).
    blocked_since: AtomicU64,
    /// When it was accepted or last finished a request (same clock).
    active_at: AtomicU64,
    /// The socket (a duplicate descriptor), to see whether bytes wait unread.
    socket: Option<std::net::TcpStream>,
    close: Notify,
    epoch: Instant,
}

impl Connection {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Neither a request in flight nor a write waiting for the client.
    fn idle(&self) -> bool {
        self.in_flight.load(Relaxed) == 0 && self.blocked_since.load(Relaxed) == 0
    }

    /// Idle past the grace with nothing unread: since when (ms), or `None`.
    fn idle_since(&self) -> Option<u64> {
        let since = self.active_at.load(Relaxed);
        let past_grace = self.now_ms().saturating_sub(since) >= IDLE_GRACE.as_millis() as u64;
        (self.idle() && past_grace && !self.request_waiting()).then_some(since)
    }

    /// Bytes wait in the socket that no request read yet (the socket is
    /// non-blocking: an empty one answers `WouldBlock`). A peer that closed
    /// has none.
    fn request_waiting(&self) -> bool {
        self.socket.as_ref().is_none_or(|socket| matches!(socket.peek(&mut [0u8; 1]), Ok(n) if n > 0))
    }

    /// Its writes have waited at least `at_least` for the client, and no
    /// request of its in flight carries a token.
    fn stalled_without_token(&self, at_least: Duration) -> Option<u64> {
        let since = self.blocked_since.load(Relaxed);
        let stalled = since != 0 && self.now_ms().saturating_sub(since) >= at_least.as_millis() as u64;
        (stalled && self.tokened_in_flight.load(Relaxed) == 0).then_some(since)
    }

    /// Notes whether a write had to wait for room.
    fn wrote(&self, blocked: bool) {
        if !blocked {
            self.blocked_since.store(0, Relaxed);
        } else if self.blocked_since.load(Relaxed) == 0 {
            self.blocked_since.store(self.now_ms(), Relaxed);
        }
    }
}

/// Holds a connection's place until dropped.
#[derive(Debug)]
pub(super) struct Place {
    admission: Arc<Admission>,
    id: u64,
    pub(super) connection: Arc<Connection>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.admission.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

impl Admission {
    pub(super) fn new(limits: Limits, tokens: Tokens) -> Arc<Self> {
        Arc::new(Self {
            limits,
            tokens,
            slots: Arc::new(Semaphore::new(limits.connections)),
            open: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(0),
            anonymous: AtomicUsize::new(0),
            epoch: Instant::now(),
        })
    }

    /// A place for `stream`, just accepted: a free one, else the longest
    /// idle connection's, else the next to end.
    pub(super) async fn place(self: &Arc<Self>, stream: &tokio::net::TcpStream) -> Place {
        let slot = loop {
            if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
                break slot;
            }
            self.close_oldest_idle();
            let waited = tokio::time::timeout(Duration::from_millis(20), Arc::clone(&self.slots).acquire_owned());
            if let Ok(Ok(slot)) = waited.await {
                break slot;
            }
        };
        let connection = Arc::new(Connection {
            in_flight: AtomicUsize::new(0),
            tokened_in_flight: AtomicUsize::new(0),
            evicted: std::sync::atomic::AtomicBool::new(false),
            blocked_since: AtomicU64::new(0),
            active_at: AtomicU64::new(0),
            // Without a duplicate (descriptors out) it counts as waiting: never taken for idle.
            socket: std::os::fd::AsFd::as_fd(stream).try_clone_to_owned().ok().map(std::net::TcpStream::from),
            close: Notify::new(),
            epoch: self.epoch,
        });
        connection.active_at.store(connection.now_ms(), Relaxed);
        let id = self.next_id.fetch_add(1, Relaxed);
        self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Arc::clone(&connection));
        Place { admission: Arc::clone(self), id, connection, _slot: slot }
    }

    /// Makes room: closes the longest idle connection, else the one whose
    /// client has taken no bytes the longest (see [`PRESSURE_STALL`]).
    fn close_oldest_idle(&self) {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let longest =
            open.values().filter_map(|c| c.idle_since().map(|since| (since, c))).min_by_key(|(since, _)| *since);
        let chosen = longest.or_else(|| {
            open.values()
                .filter_map(|c| c.stalled_without_token(PRESSURE_STALL).map(|since| (since, c)))
                .min_by_key(|(since, _)| *since)
        });
        if let Some((_, connection)) = chosen {
            if !connection.idle() {
                connection.evicted.store(true, Relaxed);
            }
            // Stored, so a connection task not yet waiting still sees it.
            connection.close.notify_one();
        }
    }

    /// Serves `request` on `connection` through `router`, unless it is one
    /// anonymous request too many.
    pub(super) async fn serve<B>(
        self: Arc<Self>,
        connection: Arc<Connection>,
        router: axum::Router,
        request: Request<B>,
    ) -> Result<Response, std::convert::Infallible>
    where
        B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        let tokened = super::auth::holds_a_token(&self.tokens, request.headers());
        let anonymous = !super::auth::is_probe(request.method(), request.uri().path()) && !tokened;
        if anonymous && self.anonymous.fetch_add(1, Relaxed) >= self.limits.anonymous {
            self.anonymous.fetch_sub(1, Relaxed);
            return Ok(self.too_many());
        }
        connection.in_flight.fetch_add(1, Relaxed);
        connection.tokened_in_flight.fetch_add(usize::from(tokened), Relaxed);
        let ticket = Ticket { admission: Arc::clone(&self), connection, anonymous, tokened };
        let response = tower::ServiceExt::oneshot(router, request.map(Body::new)).await?;
        // Held until hyper has taken the whole body.
        Ok(response.map(|body| {
            Body::new(body.map_err(axum::Error::new).map_frame(move |frame| {
                let _held = &ticket;
                frame
            }))
        }))
    }

    fn too_many(&self) -> Response {
        let mut response = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} requests without a token are in flight, the most the admin API serves at once; retry, or send the token",
                self.limits.anonymous
            ),
            None,
        )
        .into_response();
        response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        response
    }

    /// Resolves when `connection` must close: another needs its idle place,
    /// or a write waited [`Limits::stall`] for the client to take bytes.
    pub(super) async fn must_close(&self, connection: &Connection) {
        let stall = self.limits.stall.as_millis() as u64;
        let check = (self.limits.stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        loop {
            tokio::select! {
                () = connection.close.notified() => {
                    if connection.idle() {
                        return;
                    }
                    if connection.evicted.load(Relaxed) {
                        tracing::debug!("admin API: a client took no bytes for {PRESSURE_STALL:?} while a new connection needed its place; its connection is closed");
                        return;
                    }
                }
                () = tokio::time::sleep(check) => {
                    let since = connection.blocked_since.load(Relaxed);
                    if since != 0 && connection.now_ms().saturating_sub(since) >= stall {
                        tracing::warn!("admin API: a client took no bytes for {:?}; its connection is closed", self.limits.stall);
                        return;
                    }
                }
            }
        }
    }
}

/// A request's claim on its connection (and on the anonymous limit), given
/// back when its response body is taken or dropped.
struct Ticket {
    admission: Arc<Admission>,
    connection: Arc<Connection>,
    anonymous: bool,
    tokened: bool,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.connection.active_at.store(self.connection.now_ms(), Relaxed);
        self.connection.in_flight.fetch_sub(1, Relaxed);
        self.connection.tokened_in_flight.fetch_sub(usize::from(self.tokened), Relaxed);
        if self.anonymous {
            self.admission.anonymous.fetch_sub(1, Relaxed);
        }
    }
}

/// A connection's socket, noting when its writes wait for the client.
pub(super) struct Watched<T> {
    inner: T,
    connection: Arc<Connection>,
}

impl<T> Watched<T> {
    pub(super) fn new(inner: T, connection: Arc<Connection>) -> Self {
        Self { inner, connection }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.connection.wrote(written.is_pending());
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.connection.wrote(written.is_pending());
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.connection.wrote(flushed.is_pending());
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
