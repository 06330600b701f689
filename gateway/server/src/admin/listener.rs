//! The admin server's accept loop. `axum::serve` accepts without limit and
//! gives hyper no timer, so idle or slow clients could hold descriptors
//! forever, and once the process runs out of them nothing else (config
//! files, sockets) can be opened. Here an accepted connection waits in the
//! [`Lobby`] until its first request bytes arrive, is then admitted by
//! [`Admission`] (bounded, idle ones closed first when a new one needs a
//! place), and is closed if it has not sent a byte, or a whole request
//! header, within [`HEADER_TIMEOUT`] (idle keep-alive included).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;

use super::admission::{Admission, Limits, Watched};
use super::lobby::Lobby;
use super::tokens::Tokens;

/// Time a client has to send a request's header, from connecting or from the last response.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stop waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections the kernel queues for accepting (capped by
/// `net.core.somaxconn`). Tokio's default, 128, overflows under a client
/// that holds hundreds of connections, and a probe whose handshake finds
/// the queue full waits out a one-second SYN retransmission.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` with room for [`LISTEN_BACKLOG`] queued connections.
pub(super) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Bytes of send buffer per admin connection (the kernel doubles it):
/// enough for a scrape or a status at once, and for a download at about
/// 2 Gb/s over a millisecond of round trip.
const SEND_BUFFER: usize = 128 << 10;

/// Serves `router` on `listener` until `stop` fires.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    tokens: Tokens,
    limits: Limits,
    mut stop: oneshot::Receiver<()>,
) {
    let admission = Admission::new(limits, tokens);
    let lobby = Lobby::new(limits.waiting);
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = accept(&listener) => accepted,
        };
        let Some(stream) = accepted else { continue };
        // A small send buffer: a client that takes no bytes fills it (and
        // shows as stalled) after a few answers, not after megabytes of them.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER);
        let seat = lobby.enter();
        let (admission, router, http, watcher) =
            (Arc::clone(&admission), router.clone(), http.clone(), graceful.watcher());
        tokio::spawn(async move {
            if !seat.request_arrives(&stream, HEADER_TIMEOUT).await {
                return;
            }
            drop(seat);
            let place = admission.place(&stream).await;
            let service = {
                let (admission, connection) = (Arc::clone(&admission), Arc::clone(&place.connection));
                hyper::service::service_fn(move |request| {
                    Arc::clone(&admission).serve(Arc::clone(&connection), router.clone(), request)
                })
            };
            let io = TokioIo::new(Watched::new(stream, Arc::clone(&place.connection)));
            let connection = watcher.watch(http.serve_connection(io, service));
            // Timeouts and resets end connections; they are the client's business.
            tokio::select! {
                _ = connection => {}
                () = admission.must_close(&place.connection) => {}
            }
            drop(place);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("admin API: requests still in flight after {DRAIN_TIMEOUT:?} were cut off");
    }
}

/// The next connection; `None` after an accept error, which is logged and
/// slowed down (descriptors out: wait for some to close).
async fn accept(listener: &TcpListener) -> Option<tokio::net::TcpStream> {
    match listener.accept().await {
        Ok((stream, _)) => Some(stream),
        Err(e) => {
            tracing::warn!("admin API: accept failed: {e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    use axum::routing::get;

    use super::*;

    /// Serves `router` on a fresh loopback port in the background.
    async fn start(router: Router, tokens: Tokens, limits: Limits) -> (SocketAddr, oneshot::Sender<()>) {
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(serve(listener, router, tokens, limits, stopped));
        (addr, stop)
    }

    /// `GET path` on a new connection: the status code and how long the answer took.
    fn get_status(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, Duration) {
        let started = Instant::now();
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).unwrap();
        let code = std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap();
        (code, started.elapsed())
    }

    /// The 1000-idle-connections attack of issue 29: a client holds many
    /// connections open without a request, reopening any that close.
    /// Probes on new connections are answered within a second all along.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_that_send_nothing_never_keep_a_probe_waiting() {
        let captures = tempfile::tempdir().unwrap();
        let (router, _, _) =
            super::super::in_process(super::super::tests::CONFIG, captures.path().into(), 0, Tokens::default())
                .unwrap();
        let (addr, _stop) = start(router, Tokens::default(), Limits::default()).await;
        let attacking = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let attacker = std::thread::spawn({
            let attacking = Arc::clone(&attacking);
            move || {
                let mut held: Vec<TcpStream> = Vec::new();
                while attacking.load(std::sync::atomic::Ordering::Relaxed) {
                    // Open while a peek would block; closed ones are reopened.
                    held.retain(|s| {
                        s.set_nonblocking(true).unwrap();
                        matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                    });
                    while held.len() < 400 {
                        match TcpStream::connect(addr) {
                            Ok(s) => held.push(s),
                            Err(_) => break,
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        for _ in 0..10 {
            let (code, took) = tokio::task::spawn_blocking(move || get_status(addr, "/healthz", None)).await.unwrap();
            assert_eq!(code, 200);
            assert!(took < Duration::from_secs(1), "a probe waited {took:?} behind idle connections");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        attacking.store(false, std::sync::atomic::Ordering::Relaxed);
        attacker.join().unwrap();
    }

    /// Requests without a token hold at most `anonymous` connections at
    /// once; past that they get 503 at once, while probes and requests with
    /// the token are still served.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn anonymous_requests_have_a_share_and_probes_and_tokens_the_rest() {
        let router = Router::new()
            .route("/slow", get(|| async { tokio::time::sleep(Duration::from_millis(1500)).await }))
            .route("/healthz", get(|| async {}));
        let tokens = Tokens { write: Some("secret".into()), read: None };
        let limits = Limits { connections: 8, anonymous: 2, ..Limits::default() };
        let (addr, _stop) = start(router, tokens, limits).await;
        let slow: Vec<_> = (0..2).map(|_| std::thread::spawn(move || get_status(addr, "/slow", None))).collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (code, took) = tokio::task::spawn_blocking(move || get_status(addr, "/slow", None)).await.unwrap();
        assert_eq!(code, 503, "a third request without a token");
        assert!(took < Duration::from_millis(500), "refused at once, not after a wait: {took:?}");
        let (code, _) = tokio::task::spawn_blocking(move || get_status(addr, "/healthz", None)).await.unwrap();
        assert_eq!(code, 200, "a probe is served");
        let (code, _) = tokio::task::spawn_blocking(move || get_status(addr, "/slow", Some("secret"))).await.unwrap();
        assert_eq!(code, 200, "a request with the token is served");
        for request in slow {
            assert_eq!(request.join().unwrap().0, 200);
        }
    }

    /// A response the client does not read (a capture download nobody
    /// takes) is cut once it went `stall` without a byte leaving.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_response_nobody_reads_is_cut_after_the_stall_limit() {
        const BIG: usize = 256 << 20;
        let router = Router::new().route("/big", get(|| async { vec![7u8; BIG] }));
        let limits = Limits { stall: Duration::from_millis(300), ..Limits::default() };
        let (addr, _stop) = start(router, Tokens::default(), limits).await;
        let got = tokio::task::spawn_blocking(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(stream, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            std::thread::sleep(Duration::from_millis(2000));
            let mut bytes = 0;
            let mut buf = vec![0u8; 1 << 20];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes += n;
            }
            bytes
        })
        .await
        .unwrap();
        assert!(got < BIG, "the stalled response was cut ({got} of {BIG} bytes)");
    }
}
