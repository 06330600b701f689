//! Consumers outside the gateway (the `daqiri-consumer` crate's other
//! end): processes that subscribe to an RX queue over the consumer socket
//! and read its bursts in the gateway's own memory, mapped read-only.
//!
//! The application loop offers every burst here after counting it; a
//! burst some consumer subscribed to is shared among them (fan-out) and its
//! buffers go back to their pool once every one of them released it. A
//! consumer whose ring is full loses that burst alone, counted as its lag:
//! receive never waits for a consumer. Housekeeping ([`Hub::tend`], every
//! few milliseconds) takes back what consumers released and ends the
//! subscriptions of an engine that was replaced.

mod feed;
mod listener;

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use daqiri::Burst;
use daqiri_consumer::protocol::Answer;

use feed::Feed;
pub(crate) use listener::Listener;

use crate::live::LiveEngine;

/// Every subscription, and what a consumer must show to subscribe.
#[derive(Debug)]
pub(crate) struct Hub {
    feeds: Mutex<Vec<Subscribed>>,
    /// Subscriptions now: none means a burst is dropped without a lock.
    count: AtomicUsize,
    next_id: AtomicU64,
    token: Option<String>,
}

/// A subscription and its consumer's socket (to say why it ended).
#[derive(Debug)]
struct Subscribed {
    feed: Feed,
    socket: OwnedFd,
}

/// One subscription, as the status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubscriptionStats {
    pub id: u64,
    pub port: u16,
    pub queue: u16,
    pub delivered: u64,
    /// Bursts dropped for this consumer alone, its ring full.
    pub consumer_lag: u64,
    /// Bursts it holds now.
    pub held: usize,
}

impl Hub {
    /// A hub whose consumers must give `token`, where one is set.
    pub(crate) fn new(token: Option<String>) -> Arc<Self> {
        Arc::new(Self { feeds: Mutex::new(Vec::new()), count: AtomicUsize::new(0), next_id: AtomicU64::new(1), token })
    }

    /// Hands `burst` to the consumers subscribed to its queue; drops it
    /// (its buffers back) when there are none.
    pub(crate) fn offer(&self, burst: Burst) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let key = (burst.port_id(), burst.queue_id());
        let engine = burst.engine_id();
        let burst = Arc::new(burst);
        let mut feeds = self.lock();
        let mut broken = Vec::new();
        for subscribed in feeds.iter_mut().filter(|s| s.feed.target == key && s.feed.engine == engine) {
            if let Err(e) = subscribed.feed.deliver(&burst) {
                broken.push((subscribed.feed.id, e.to_string()));
            }
        }
        for (id, why) in broken {
            self.remove(&mut feeds, id, &why);
        }
    }

    /// Takes back what consumers released, and ends the subscriptions of
    /// an engine that is no longer `live`'s.
    pub(crate) fn tend(&self, live: &LiveEngine) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let current = live.get().map(|engine| engine.id());
        let mut feeds = self.lock();
        let mut ended = Vec::new();
        for subscribed in feeds.iter_mut() {
            if Some(subscribed.feed.engine) != current {
                ended.push((
                    subscribed.feed.id,
                    "the engine restarted (a config was applied): subscribe again".to_owned(),
                ));
            } else if let Err(e) = subscribed.feed.reclaim() {
                ended.push((subscribed.feed.id, e.to_string()));
            }
        }
        for (id, why) in ended {
            self.remove(&mut feeds, id, &why);
        }
    }

    /// Ends every subscription, saying `why` (the gateway stops).
    pub(crate) fn end_all(&self, why: &str) {
        let mut feeds = self.lock();
        let ids: Vec<u64> = feeds.iter().map(|s| s.feed.id).collect();
        for id in ids {
            self.remove(&mut feeds, id, why);
        }
    }

    /// The subscriptions now.
    pub(crate) fn stats(&self) -> Vec<SubscriptionStats> {
        self.lock()
            .iter()
            .map(|s| SubscriptionStats {
                id: s.feed.id,
                port: s.feed.target.0,
                queue: s.feed.target.1,
                delivered: s.feed.delivered,
                consumer_lag: s.feed.lag,
                held: s.feed.held(),
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subscribed>> {
        self.feeds.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn check_token(&self, given: Option<&str>) -> Result<(), String> {
        match (&self.token, given) {
            (None, _) => Ok(()),
            (Some(token), Some(given)) if token == given => Ok(()),
            (Some(_), _) => Err("a wrong or missing consumer token".into()),
        }
    }

    fn add(&self, feed: Feed, socket: OwnedFd) {
        self.lock().push(Subscribed { feed, socket });
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends subscription `id` (if it is still there), saying `why`.
    fn end(&self, id: u64, why: &str) {
        self.remove(&mut self.lock(), id, why);
    }

    /// Ends subscription `id`: what its consumer held goes back, it is told
    /// `why`, and its socket is shut so its thread lets go.
    fn remove(&self, feeds: &mut Vec<Subscribed>, id: u64, why: &str) {
        let Some(at) = feeds.iter().position(|s| s.feed.id == id) else { return };
        let ended = feeds.swap_remove(at);
        self.count.fetch_sub(1, Ordering::Relaxed);
        tracing::info!(subscription = id, held = ended.feed.held(), "a consumer's subscription ended: {why}");
        let message = serde_json::to_vec(&Answer::Ended { reason: why.to_owned() }).expect("an end serialises");
        let _ = daqiri_consumer::wire::send(&ended.socket, &message, &[]);
        let _ = rustix::net::shutdown(&ended.socket, rustix::net::Shutdown::Both);
    }
}
