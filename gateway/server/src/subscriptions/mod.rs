//! Consumers outside the gateway (the `daqiri-consumer` crate's other
//! end): processes that subscribe to an RX queue over the consumer socket
//! and read its bursts in the gateway's own memory, mapped read-only.
//!
//! The application loop offers every burst here after counting it; a
//! burst some consumers subscribed to is shared among them (fan-out; a
//! group's members take turns) and its buffers go back to their pool once
//! every one of them released it. A consumer whose ring is full loses that
//! burst alone, counted as its lag, so receive never waits for a consumer;
//! unless it asked to hold back, when the burst waits for it ([`HeldBack`])
//! and its queue is not drained meanwhile, as it would not be for a slow
//! application of its own; the other queues go on. Housekeeping ([`Hub::tend`],
//! every few milliseconds) takes back what consumers released and ends the
//! subscriptions of an engine that was replaced.

mod budget;
mod feed;
pub(crate) mod filter;
mod listener;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use daqiri::Burst;
use daqiri_consumer::protocol::{Answer, WhenFull};

pub(crate) use budget::DEFAULT_PERCENT as DEFAULT_BUDGET_PERCENT;
use budget::{Budget, Limits};
use feed::{Feed, Given};
use filter::Filter;
pub(crate) use listener::{Listener, serve};

use crate::live::LiveEngine;

/// A burst a consumer that holds back had no room for: its queue waits
/// until it is given ([`Hub::retry`]).
#[derive(Debug)]
pub(crate) struct HeldBack {
    burst: Arc<Burst>,
    waiting: Vec<Recipient>,
}

impl HeldBack {
    /// The port and RX queue it came from, which waits for it.
    pub(crate) fn queue(&self) -> (u16, u16) {
        (self.burst.port_id(), self.burst.queue_id())
    }
}

/// Every subscription, and what a consumer must show to subscribe.
#[derive(Debug)]
pub(crate) struct Hub {
    state: Mutex<State>,
    /// Subscriptions now: none means a burst is dropped without a lock.
    count: AtomicUsize,
    next_id: AtomicU64,
    token: Option<String>,
    /// Whether GPU memory is refused to every consumer (`--consumer-host-memory-only`).
    host_memory_only: bool,
    /// The share of each queue and region all consumers may pin (`--consumer-budget-percent`).
    budget_percent: u8,
    /// Set when the gateway stops: nothing waits for a consumer any more.
    stopping: AtomicBool,
    /// Consumers turned away before a subscription, by [`Refusal`].
    refusals: [AtomicU64; Refusal::ALL.len()],
}

/// Why the consumer socket turned a connection away before its hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `--consumer-max-connections` were open already.
    TooManyConnections,
    /// `accept` failed: the process is out of descriptors or memory.
    AcceptFailed,
    /// No thread could be started for the connection.
    NoThread,
}

impl Refusal {
    pub(crate) const ALL: [Refusal; 3] = [Refusal::TooManyConnections, Refusal::AcceptFailed, Refusal::NoThread];

    /// Its name in stats and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::TooManyConnections => "too_many_connections",
            Refusal::AcceptFailed => "accept_failed",
            Refusal::NoThread => "no_thread",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    feeds: Vec<Subscribed>,
    /// Per group: whose turn it is.
    turns: HashMap<GroupKey, usize>,
    /// What all consumers together pin, and may.
    budget: Budget,
    /// Bursts a consumer just released, kept between calls for its room.
    released: Vec<Arc<Burst>>,
}

/// Takes back what `feed`'s consumer released, and gives it back to the
/// budget (`released` is scratch room, left empty).
fn reclaim(
    feed: &mut Feed,
    budget: &mut Budget,
    released: &mut Vec<Arc<Burst>>,
) -> Result<(), daqiri_consumer::ring::Broken> {
    let result = feed.reclaim(released);
    for burst in released.drain(..) {
        budget.release(&burst, feed.id);
    }
    result
}

impl State {
    /// Positions in `feeds` of the subscriptions `recipient` stands for, of engine `engine`.
    fn members(&self, recipient: &Recipient, engine: daqiri::EngineId) -> Vec<usize> {
        let of = |i: &usize| {
            let feed = &self.feeds[*i].feed;
            feed.engine == engine
                && match recipient {
                    Recipient::Feed(id) => feed.id == *id,
                    Recipient::Group((name, filter)) => feed.group.as_ref() == Some(name) && feed.filter == *filter,
                }
        };
        (0..self.feeds.len()).filter(of).collect()
    }

    /// Whose turn it is among `members` of `recipient` (a group's advance each burst).
    fn next_turn(&mut self, recipient: &Recipient, members: usize) -> usize {
        match recipient {
            Recipient::Group(key) => {
                let turn = self.turns.entry(key.clone()).or_default();
                *turn = (*turn + 1) % members;
                *turn
            }
            Recipient::Feed(_) => 0,
        }
    }
}

/// Whether interface `port` of `config` has RX flow `flow` (from the
/// config, or added at runtime).
fn has_flow(config: &daqiri::config::model::EngineConfig, port: u16, flow: u32) -> bool {
    let rx = config.interfaces.get(usize::from(port)).and_then(|i| i.rx.as_ref());
    rx.is_some_and(|rx| rx.flows.iter().any(|f| f.id == flow))
}

/// A group: its name and what its members take.
type GroupKey = (String, Filter);

/// A subscription and its consumer's socket (to say why it ended).
#[derive(Debug)]
struct Subscribed {
    feed: Feed,
    socket: OwnedFd,
}

/// Who a burst is for: one subscription, or one member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Recipient {
    Feed(u64),
    Group(GroupKey),
}

/// One subscription, as the status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubscriptionStats {
    pub id: u64,
    pub target: Filter,
    pub group: Option<String>,
    pub delivered: u64,
    /// Bursts dropped for this consumer alone, its ring full or consumers
    /// together at their budget.
    pub consumer_lag: u64,
    /// Of those, dropped because consumers together were at their budget.
    pub over_budget: u64,
    /// Bursts it holds now.
    pub held: usize,
}

impl Hub {
    /// A hub whose consumers must give `token`, where one is set, may pin
    /// `budget_percent` of each queue and region together, and are shared
    /// GPU memory unless `host_memory_only`.
    pub(crate) fn new(token: Option<String>, budget_percent: u8, host_memory_only: bool) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            count: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            token,
            host_memory_only,
            budget_percent,
            stopping: AtomicBool::new(false),
            refusals: Default::default(),
        })
    }

    /// Learns `engine`'s budget (see [`Limits`]) before its first subscription.
    pub(crate) fn know_engine(&self, engine: &daqiri::Engine) {
        self.lock().budget.know(engine.id(), || Limits::of(engine, self.budget_percent));
    }

    /// Counts a connection turned away.
    pub(crate) fn count_refusal(&self, why: Refusal) {
        self.refusals[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Connections turned away so far, by reason.
    pub(crate) fn refusals(&self) -> impl Iterator<Item = (Refusal, u64)> + '_ {
        Refusal::ALL.into_iter().map(|why| (why, self.refusals[why as usize].load(Ordering::Relaxed)))
    }

    /// Hands `burst` to the consumers whose subscriptions take it; drops it
    /// (its buffers back) when there are none. What a consumer that holds
    /// back had no room for comes back, for [`retry`](Self::retry) while its
    /// queue waits.
    pub(crate) fn offer(&self, burst: Burst) -> Option<HeldBack> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let burst = Arc::new(burst);
        let recipients = self.recipients(&burst);
        if recipients.is_empty() {
            return None;
        }
        // A GPU aggregate or a copy into GPU memory may still be in flight;
        // a consumer in another process cannot wait on our CUDA event.
        burst.wait_ready();
        let waiting = self.give(&burst, recipients);
        self.still_held(HeldBack { burst, waiting })
    }

    /// Offers a held-back burst again to those it waits for; it comes back
    /// while one still has no room, until the gateway stops.
    pub(crate) fn retry(&self, held: HeldBack) -> Option<HeldBack> {
        let waiting = self.give(&held.burst, held.waiting);
        self.still_held(HeldBack { burst: held.burst, waiting })
    }

    fn still_held(&self, held: HeldBack) -> Option<HeldBack> {
        (!held.waiting.is_empty() && !self.stopping.load(Ordering::Relaxed)).then_some(held)
    }

    /// Who `burst` is for: each subscription outside a group that takes
    /// it, and each group whose members take it.
    fn recipients(&self, burst: &Burst) -> Vec<Recipient> {
        let state = self.lock();
        let mut recipients = Vec::new();
        for s in state.feeds.iter().filter(|s| s.feed.engine == burst.engine_id() && s.feed.filter.takes(burst)) {
            let recipient = match &s.feed.group {
                None => Recipient::Feed(s.feed.id),
                Some(name) => Recipient::Group((name.clone(), s.feed.filter.clone())),
            };
            if !recipients.contains(&recipient) {
                recipients.push(recipient);
            }
        }
        recipients
    }

    /// Gives `burst` to each of `recipients`; those that hold back and had
    /// no room, to try again.
    fn give(&self, burst: &Arc<Burst>, recipients: Vec<Recipient>) -> Vec<Recipient> {
        let mut state = self.lock();
        let mut waiting = Vec::new();
        let mut broken = Vec::new();
        for recipient in recipients {
            let members = state.members(&recipient, burst.engine_id());
            if members.is_empty() {
                continue;
            }
            // A group's members take turns; the first with room takes it.
            let turn = state.next_turn(&recipient, members.len());
            let (mut taken, mut over_budget) = (false, false);
            for k in 0..members.len() {
                let State { feeds, budget, released, .. } = &mut *state;
                let feed = &mut feeds[members[(turn + k) % members.len()]].feed;
                if let Err(e) = reclaim(feed, budget, released) {
                    broken.push((feed.id, e.to_string()));
                    continue;
                }
                // A member at its part of the budget passes its turn on.
                let Some(claim) = budget.claim(burst, feed.id) else {
                    over_budget = true;
                    continue;
                };
                match feed.deliver(burst) {
                    Ok(Given::Delivered) => {
                        budget.hold(burst, claim, feed.id);
                        taken = true;
                        break;
                    }
                    Ok(Given::Nothing) => {
                        taken = true;
                        break;
                    }
                    Ok(Given::Full) => {}
                    Err(e) => broken.push((feed.id, e.to_string())),
                }
            }
            if !taken {
                let first = &mut state.feeds[members[turn]].feed;
                match first.when_full {
                    WhenFull::HoldBack => waiting.push(recipient),
                    WhenFull::Drop => first.lost(over_budget),
                }
            }
        }
        for (id, why) in broken {
            self.remove(&mut state, id, &why);
        }
        waiting
    }

    /// Takes back what consumers released, and ends the subscriptions of
    /// an engine that is no longer `live`'s, and of flows a reload removed.
    pub(crate) fn tend(&self, live: &LiveEngine) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let engine = live.get();
        let current = engine.as_ref().map(|engine| engine.id());
        let config = engine.as_ref().map(|engine| engine.config());
        let mut state = self.lock();
        let mut ended = Vec::new();
        let State { feeds, budget, released, .. } = &mut *state;
        for subscribed in feeds.iter_mut() {
            if Some(subscribed.feed.engine) != current {
                ended.push((
                    subscribed.feed.id,
                    "the engine restarted (a config was applied): subscribe again".to_owned(),
                ));
            } else if let Filter::Flow { port, flow } = subscribed.feed.filter
                && !config.as_ref().is_some_and(|c| has_flow(c.config(), port, flow))
            {
                ended.push((subscribed.feed.id, format!("flow {flow} was removed (a reload or a flow deletion)")));
            } else if let Err(e) = reclaim(&mut subscribed.feed, budget, released) {
                ended.push((subscribed.feed.id, e.to_string()));
            }
        }
        for (id, why) in ended {
            self.remove(&mut state, id, &why);
        }
        state.budget.forget_idle(current);
    }

    /// Waits for no consumer from now on (the gateway stops).
    pub(crate) fn stop_waiting(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Ends every subscription, saying `why` (the gateway stops).
    pub(crate) fn end_all(&self, why: &str) {
        let mut state = self.lock();
        let ids: Vec<u64> = state.feeds.iter().map(|s| s.feed.id).collect();
        for id in ids {
            self.remove(&mut state, id, why);
        }
    }

    /// The subscriptions now.
    pub(crate) fn stats(&self) -> Vec<SubscriptionStats> {
        self.lock()
            .feeds
            .iter()
            .map(|s| SubscriptionStats {
                id: s.feed.id,
                target: s.feed.filter.clone(),
                group: s.feed.group.clone(),
                delivered: s.feed.delivered,
                consumer_lag: s.feed.lag,
                over_budget: s.feed.over_budget,
                held: s.feed.held(),
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn check_token(&self, given: Option<&str>) -> Result<(), String> {
        match (&self.token, given) {
            (None, _) => Ok(()),
            // Compared in constant time, so timing does not reveal the token.
            (Some(token), Some(given))
                if bool::from(subtle::ConstantTimeEq::ct_eq(token.as_bytes(), given.as_bytes())) =>
            {
                Ok(())
            }
            (Some(_), _) => Err("a wrong or missing consumer token".into()),
        }
    }

    fn add(&self, feed: Feed, socket: OwnedFd) {
        let mut state = self.lock();
        state.budget.join(feed.engine, feed.id);
        state.feeds.push(Subscribed { feed, socket });
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends subscription `id` (if it is still there), saying `why`.
    fn end(&self, id: u64, why: &str) {
        self.remove(&mut self.lock(), id, why);
    }

    /// Ends subscription `id`: what its consumer held goes back, it is told
    /// `why`, and its socket is shut so its thread lets go.
    fn remove(&self, state: &mut State, id: u64, why: &str) {
        let Some(at) = state.feeds.iter().position(|s| s.feed.id == id) else { return };
        // `remove`, not `swap_remove`: a group's turns follow the order.
        let mut ended = state.feeds.remove(at);
        self.count.fetch_sub(1, Ordering::Relaxed);
        for burst in ended.feed.take_held() {
            state.budget.release(&burst, id);
        }
        state.budget.leave(ended.feed.engine, id);
        // A group's turn is forgotten with its last member: names are the
        // consumers' to choose, and must not pile up.
        if let Some(group) = &ended.feed.group {
            let key = (group.clone(), ended.feed.filter.clone());
            if !state.feeds.iter().any(|s| s.feed.group.as_ref() == Some(group) && s.feed.filter == key.1) {
                state.turns.remove(&key);
            }
        }
        tracing::info!(subscription = id, held = ended.feed.held(), "a consumer's subscription ended: {why}");
        let message = serde_json::to_vec(&Answer::Ended { reason: why.to_owned() }).expect("an end serialises");
        let _ = daqiri_consumer::wire::send(&ended.socket, &message, &[]);
        let _ = rustix::net::shutdown(&ended.socket, rustix::net::Shutdown::Both);
    }
}
