//! Where an accepted connection waits for its first request bytes before it
//! may ask [`Admission`](super::admission::Admission) for a place. A client
//! that connects and sends nothing never holds a place, and the accept loop
//! never waits on one, so a probe queued behind a thousand silent
//! connections is accepted as fast as the kernel hands them over (issue
//! 29: idle connections reopened as they close once kept probes waiting
//! while each was given a place and taken back in turn). The lobby is
//! bounded, as descriptors are: when it is full its oldest member is closed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::Notify;

/// Accepted connections that have not sent a byte yet.
#[derive(Debug)]
pub(super) struct Lobby {
    capacity: usize,
    /// Members by arrival, each with the signal that closes it.
    members: Mutex<BTreeMap<u64, Arc<Notify>>>,
    next_id: AtomicU64,
}

/// One connection's seat in the lobby, given up when dropped.
#[derive(Debug)]
pub(super) struct Seat {
    lobby: Arc<Lobby>,
    id: u64,
    evicted: Arc<Notify>,
}

impl Lobby {
    pub(super) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self { capacity: capacity.max(1), members: Mutex::new(BTreeMap::new()), next_id: AtomicU64::new(0) })
    }

    /// A seat for a connection just accepted; the oldest member makes room
    /// when the lobby is full.
    pub(super) fn enter(self: &Arc<Self>) -> Seat {
        let mut members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        while members.len() >= self.capacity {
            if let Some((_, oldest)) = members.pop_first() {
                // Stored, so a member not yet waiting still sees it.
                oldest.notify_one();
            }
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        let evicted = Arc::new(Notify::new());
        members.insert(id, Arc::clone(&evicted));
        Seat { lobby: Arc::clone(self), id, evicted }
    }
}

impl Seat {
    /// Whether `stream` had bytes to read (or its peer closed) within
    /// `limit`, before the lobby needed the seat for a newer connection. A
    /// member told to make room that has spoken by then still leaves for a
    /// place: the accept loop may have run far ahead of its first look.
    pub(super) async fn request_arrives(&self, stream: &TcpStream, limit: Duration) -> bool {
        let mut first = [0u8; 1];
        tokio::select! {
            // Zero bytes is a closed peer: it leaves, and hyper sees the end.
            peeked = stream.peek(&mut first) => peeked.is_ok(),
            () = self.evicted.notified() => spoke(stream),
            () = tokio::time::sleep(limit) => false,
        }
    }
}

/// Bytes (or the peer's end) wait in `stream` now. Asked of the socket
/// itself: tokio's own peek waits for its reactor to have seen readiness.
fn spoke(stream: &TcpStream) -> bool {
    let mut first = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    socket2::SockRef::from(stream).peek(&mut first).is_ok()
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.lobby.members.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair on loopback: the client's end and the accepted end.
    async fn pair(listener: &TcpListener) -> (std::net::TcpStream, TcpStream) {
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().await.unwrap().0)
    }

    #[tokio::test]
    async fn a_full_lobby_closes_its_oldest_silent_member_and_a_request_leaves_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let lobby = Lobby::new(2);
        let (_silent, oldest) = pair(&listener).await;
        let oldest_seat = lobby.enter();
        let (mut speaking, younger) = pair(&listener).await;
        let younger_seat = lobby.enter();
        let (_third, _) = pair(&listener).await;
        let _third_seat = lobby.enter();
        let long = Duration::from_secs(30);
        let evicted = tokio::time::timeout(Duration::from_secs(1), oldest_seat.request_arrives(&oldest, long));
        assert_eq!(evicted.await, Ok(false), "the oldest member makes room at once");
        speaking.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let spoke = tokio::time::timeout(Duration::from_secs(1), younger_seat.request_arrives(&younger, long));
        assert_eq!(spoke.await, Ok(true), "a member whose request arrived leaves the lobby");
    }

    #[tokio::test]
    async fn a_member_that_sends_nothing_is_closed_after_the_limit() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let lobby = Lobby::new(4);
        let (_silent, accepted) = pair(&listener).await;
        let seat = lobby.enter();
        assert!(!seat.request_arrives(&accepted, Duration::from_millis(50)).await);
        drop(seat);
        assert!(lobby.members.lock().unwrap().is_empty(), "a seat given up leaves the lobby");
    }
}
