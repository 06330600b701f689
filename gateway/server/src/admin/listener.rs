//! The admin server's accept loop. `axum::serve` accepts without limit and
//! gives hyper no timer, so idle or slow clients could hold descriptors
//! forever, and once the process runs out of them nothing else (config
//! files, sockets) can be opened. Here at most [`MAX_CONNECTIONS`] are
//! served at once (the rest wait in the kernel's backlog, holding none of
//! ours), and a connection that has not sent a whole request header within
//! [`HEADER_TIMEOUT`] (idle keep-alive included) is closed.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};

/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 128;
/// Time a client has to send a request's header, from connecting or from the last response.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a client has to send a request's body once its header arrived.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `router` on `listener` until `stop` fires.
pub(super) async fn serve(listener: TcpListener, router: Router, mut stop: oneshot::Receiver<()>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = accept(&listener, &slots) => accepted,
        };
        let Some((stream, slot)) = accepted else { continue };
        let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // Timeouts and resets end connections; they are the client's business.
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("admin API: requests still in flight after {DRAIN_TIMEOUT:?} were cut off");
    }
}

/// The next connection once a slot is free; `None` after an accept error,
/// which is logged and slowed down (descriptors out: wait for some to close).
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    let slot = Arc::clone(slots).acquire_owned().await.expect("the semaphore is never closed");
    match listener.accept().await {
        Ok((stream, _)) => Some((stream, slot)),
        Err(e) => {
            tracing::warn!("admin API: accept failed: {e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        }
    }
}
