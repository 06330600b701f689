//! The consumer socket's server end in-process, for the fuzz target
//! `fuzz/targets/consumer_socket.rs`: a client's messages reach the very
//! code a `--consumer-socket` connection runs, over a socket pair; once
//! subscribed, the client scribbles over its ring (the only memory it may
//! write) while bursts flow, then goes away.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use daqiri::Engine;
use daqiri_consumer::wire;
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use crate::live::LiveEngine;
use crate::subscriptions::{DEFAULT_BUDGET_PERCENT, Hub, serve};

/// The token the harness's gateway asks for.
pub const TOKEN: &str = "fuzz-consumer-token";

/// A loopback interface whose TX queue comes back on its RX queue, so the
/// harness makes the bursts a subscriber gets.
const CONFIG: &str = "\
daqiri:
  cfg:
    version: 1
    stream_type: raw
    loopback: sw
    memory_regions:
    - { name: m, kind: host, num_bufs: 64, buf_size: 256 }
    - { name: t, kind: host, num_bufs: 64, buf_size: 256 }
    interfaces:
    - name: lo
      address: loopback
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 0, batch_size: 4, timeout_us: 100, memory_regions: [m] }
      tx:
        queues:
        - { name: t0, id: 0, cpu_core: 0, batch_size: 4, memory_regions: [t] }
";

/// What one client's visit came to.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the gateway welcomed it.
    pub welcomed: bool,
    /// Subscriptions left once it went (must be none).
    pub subscriptions_left: usize,
    /// Buffers of the RX region out of the pool once it went and the
    /// bursts were drained, beyond the workers' own (must be none).
    pub buffers_out: u32,
}

/// A gateway's consumer side over a loopback engine.
#[derive(Debug)]
pub struct ConsumerHarness {
    live: Arc<LiveEngine>,
    hub: Arc<Hub>,
    /// Buffers of the RX region out of the pool with nobody subscribed
    /// (the workers' caches).
    idle: std::cell::Cell<u32>,
}

impl ConsumerHarness {
    /// A loopback engine and a hub that asks for [`TOKEN`].
    pub fn new() -> anyhow::Result<Self> {
        let harness = Self {
            live: LiveEngine::new(Engine::from_yaml(CONFIG)?),
            hub: Hub::new(Some(TOKEN.to_owned()), DEFAULT_BUDGET_PERCENT, false),
            idle: std::cell::Cell::new(0),
        };
        harness.one_burst();
        harness.idle.set(harness.in_use());
        Ok(harness)
    }

    fn in_use(&self) -> u32 {
        let engine = self.live.get().expect("the engine runs");
        engine.stats().regions.iter().find(|r| r.name == "m").map_or(0, |r| r.in_use)
    }

    /// A client that sends `messages`, then, if welcomed, writes `scribbles`
    /// (byte offset, value) into its ring while `bursts` bursts are offered,
    /// then closes its socket.
    pub fn visit(&self, messages: &[&[u8]], scribbles: &[(usize, u32)], bursts: usize) -> Outcome {
        let (client, server) =
            rustix::net::socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)
                .expect("a socket pair");
        let (hub, live) = (Arc::clone(&self.hub), Arc::clone(&self.live));
        let gateway = std::thread::spawn(move || serve(server, &hub, &live));
        for message in messages {
            // The gateway may have closed already: what a client then sends is lost.
            let _ = wire::send(&client, message, &[]);
        }
        if messages.is_empty() {
            // Says nothing at all: the gateway sees the end rather than waiting for a hello.
            let _ = rustix::net::shutdown(&client, rustix::net::Shutdown::Write);
        }
        let welcome = answer(&client);
        if let Some((len, ring)) = &welcome {
            // Whatever it wrote, the gateway reads through its own checks.
            let _ = daqiri_consumer::ring::scribble(ring, *len, scribbles);
        }
        for _ in 0..bursts {
            self.one_burst();
        }
        drop(client);
        gateway.join().expect("the connection's thread does not panic");
        // The last packets may still be on their way round the loopback, and
        // a loaded machine (AFL beside a test suite) delays the worker: a
        // leak stays out for good, so waiting longer only slows a failure.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while self.in_use() > self.idle.get() && std::time::Instant::now() < deadline {
            self.drain();
            std::thread::sleep(Duration::from_micros(200));
        }
        let in_use = self.in_use();
        if welcome.is_none() {
            // A client never welcomed was never handed a buffer: what is out
            // now is the workers' caches, whose level drifts with timing
            // (under AFL it read 1 against a baseline of 0), so it becomes the
            // baseline the next welcomed client is held to.
            self.idle.set(in_use);
        }
        let buffers_out = in_use.saturating_sub(self.idle.get());
        Outcome { welcomed: welcome.is_some(), subscriptions_left: self.hub.stats().len(), buffers_out }
    }

    /// What the engine and the hub hold now, and the idle baseline: the
    /// detail a failed visit's message needs.
    pub fn explain(&self) -> String {
        let stats = self.live.get().map(|engine| format!("{:?}", engine.stats()));
        format!(
            "idle {}, in use {}; engine {stats:?}; subscriptions {:?}",
            self.idle.get(),
            self.in_use(),
            self.hub.stats()
        )
    }

    /// Sends one packet round the loopback and offers what arrives.
    fn one_burst(&self) {
        let engine = self.live.get().expect("the engine runs");
        if let Ok(mut burst) = engine.get_tx_packet_burst(0, 0, 1) {
            let _ = burst.packet_mut(0).write(b"a packet for the consumer");
            let _ = engine.send_tx_burst(burst);
        }
        std::thread::sleep(Duration::from_micros(300));
        self.drain();
    }

    /// Offers every burst waiting, as the application loop does.
    fn drain(&self) {
        let engine = self.live.get().expect("the engine runs");
        while let Some(burst) = engine.get_rx_burst_any() {
            // What a consumer that holds back had no room for is let go: the
            // harness waits for no one.
            drop(self.hub.offer(burst));
        }
        self.hub.tend(&self.live);
    }
}

/// The gateway's answer: the ring's length and descriptor when it welcomed.
fn answer(client: &OwnedFd) -> Option<(usize, OwnedFd)> {
    rustix::net::sockopt::set_socket_timeout(
        client,
        rustix::net::sockopt::Timeout::Recv,
        Some(Duration::from_secs(10)),
    )
    .ok()?;
    let (message, fds) = wire::receive(client.as_fd()).ok()??;
    let answer: daqiri_consumer::protocol::Answer = serde_json::from_slice(&message).ok()?;
    match answer {
        daqiri_consumer::protocol::Answer::Welcome(welcome) => {
            Some((welcome.ring.len as usize, fds.into_iter().next()?))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_good_and_bad_leave_nothing_behind() {
        let harness = ConsumerHarness::new().unwrap();
        let hello = format!(r#"{{"version":1,"target":{{"interface":"lo","queue":0}},"slots":4,"token":"{TOKEN}"}}"#);
        let visit = harness.visit(&[hello.as_bytes()], &[], 8);
        assert_eq!(visit, Outcome { welcomed: true, subscriptions_left: 0, buffers_out: 0 });
        // A release counter run ahead, and a slot released that it never had.
        let visit = harness.visit(&[hello.as_bytes()], &[(3 * 64, 1000)], 4);
        assert_eq!(visit, Outcome { welcomed: true, subscriptions_left: 0, buffers_out: 0 });
        let visit = harness.visit(&[hello.as_bytes(), b"more"], &[], 2);
        assert_eq!((visit.subscriptions_left, visit.buffers_out), (0, 0));
        let wrong = hello.replace(TOKEN, "nope");
        assert!(!harness.visit(&[wrong.as_bytes()], &[], 1).welcomed, "a wrong token is refused");
        assert!(!harness.visit(&[b"\x00\xff"], &[], 1).welcomed);
        assert!(!harness.visit(&[], &[], 0).welcomed, "no hello at all");
    }
}
