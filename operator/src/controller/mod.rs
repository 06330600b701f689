//! The controller: every change that can alter a node's config (a port, a
//! flow, a gateway pod, a node, a drifted ConfigMap) becomes a trigger for
//! the one work key there is, the namespace. A single worker runs one
//! [`sync`] pass at a time over the whole namespace, since every node's config
//! depends on all resources; triggers that arrive while it waits or runs are
//! coalesced into the next pass.
//!
//! Finalizers make a deletion go through a pass that leaves the resource out
//! (render skips resources being deleted) before the finalizer is dropped.

pub mod config_maps;
mod context;
mod error;
mod metrics;
mod node_states;
mod standing_captures;
pub mod status;
mod sync;
pub mod triggers;
mod undecodable;
pub mod worker;
mod writes;

pub use context::{Context, FINALIZER, MANAGED_BY, MANAGER, NODE_LABEL, Options};
pub use error::Error;
pub use metrics::Metrics;
pub use sync::sync;
pub use writes::release_finalizer;

/// Runs the watches and the worker until `shutdown` completes.
pub async fn run(ctx: std::sync::Arc<Context>) {
    let triggers = triggers::all(&ctx);
    worker::run(ctx, triggers).await;
}
