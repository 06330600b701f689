//! The consumer socket, client by client: each input is a visit to a
//! gateway's consumer socket (the very code `--consumer-socket` runs) by a
//! client that sends some messages, scribbles over its ring if welcomed
//! while bursts flow, then goes. Whatever it does:
//! - the gateway does not panic;
//! - once it went, no subscription of it is left;
//! - every buffer a burst of it held is back in its pool.
//!
//! Input: the number of messages (0 to 3) and of bursts (0 to 15), then each
//! message as a little-endian u16 length and its bytes, then what is left
//! as (offset, value) pairs of little-endian u32s written into the ring.

use daqiri_gateway::fuzzing::ConsumerHarness;

fn main() {
    // Made in the first run of the fuzzed process, not before AFL's fork
    // server forks it: the engine's worker threads must be the child's.
    // A mutex only because afl's closure must be unwind-safe; a panic aborts.
    let harness: std::sync::Mutex<Option<ConsumerHarness>> = std::sync::Mutex::new(None);
    daqiri_gateway::fuzzing::log_panics();
    afl::fuzz!(|data: &[u8]| {
        let [counts, bursts, rest @ ..] = data else { return };
        let mut rest = rest;
        let mut messages = Vec::new();
        for _ in 0..counts % 4 {
            let [lo, hi, tail @ ..] = rest else { break };
            let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
            messages.push(&tail[..len]);
            rest = &tail[len..];
        }
        let scribbles: Vec<(usize, u32)> = rest
            .chunks_exact(8)
            .map(|pair| {
                let word = |at: usize| u32::from_le_bytes(pair[at..at + 4].try_into().expect("four bytes"));
                (word(0) as usize, word(4))
            })
            .collect();
        let mut harness = harness.lock().expect("one thread");
        let harness = harness.get_or_insert_with(|| ConsumerHarness::new().expect("the harness starts"));
        let outcome = harness.visit(&messages, &scribbles, usize::from(bursts % 16));
        let left = outcome.subscriptions_left;
        assert_eq!(left, 0, "a subscription outlived its client: {outcome:?}; {}", harness.explain());
        let out = outcome.buffers_out;
        assert_eq!(out, 0, "buffers a client held stayed out of the pool: {outcome:?}; {}", harness.explain());
    });
}
