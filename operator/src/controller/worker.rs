//! The single worker: one pass at a time, triggers coalesced.
//!
//! The first trigger after a pass opens a window; triggers keep arriving into
//! it until [`QUIET`] passes without one (at most [`MAX_WAIT`]), and then one
//! pass runs for all of them. A pass that met a conflict runs again at once;
//! one that failed otherwise is retried with a growing delay, or sooner when
//! something changes. With nothing happening, a pass still runs every
//! [`RESYNC`] as a safety net.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Instant;

use super::context::Context;
use super::error::Error;
use super::sync;
use super::triggers::Trigger;

/// How long the window stays open after the last trigger.
pub const QUIET: Duration = Duration::from_millis(200);
/// The longest a trigger waits for its pass.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// The safety-net pass interval.
pub const RESYNC: Duration = Duration::from_secs(60);
/// First and longest delay before retrying a failed pass.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

/// Runs passes until `triggers` ends.
pub async fn run(ctx: Arc<Context>, triggers: impl Stream<Item = Trigger> + Send) {
    let mut triggers = std::pin::pin!(triggers);
    let mut retry_delay = RETRY.0;
    let mut next_due = Instant::now() + RESYNC;
    loop {
        let first = tokio::select! {
            t = triggers.next() => match t {
                Some(t) => t,
                None => return,
            },
            () = tokio::time::sleep_until(next_due) => Trigger::resync(),
        };
        let mut why = vec![first];
        let closes = Instant::now() + MAX_WAIT;
        loop {
            let quiet_until = (Instant::now() + QUIET).min(closes);
            tokio::select! {
                t = triggers.next() => match t {
                    Some(t) => why.push(t),
                    None => return,
                },
                () = tokio::time::sleep_until(quiet_until) => break,
            }
        }
        tracing::debug!(triggers = why.len(), first = ?why[0], "pass");
        let started = std::time::Instant::now();
        let result = sync(&ctx).await;
        ctx.metrics.observe_pass(started.elapsed(), why.len(), result.as_ref().err());
        next_due = match result {
            Ok(()) => {
                retry_delay = RETRY.0;
                Instant::now() + RESYNC
            }
            Err(Error::Conflict(what)) => {
                tracing::info!("{what} changed while the pass ran; running again");
                Instant::now()
            }
            Err(e) => {
                tracing::warn!("pass failed, retrying in {retry_delay:?}: {e}");
                let due = Instant::now() + retry_delay;
                retry_delay = (retry_delay * 2).min(RETRY.1);
                due
            }
        };
    }
}
