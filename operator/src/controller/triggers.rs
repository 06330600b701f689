//! The watches that start passes. Each maps its events to [`Trigger`]s, and
//! only changes that can alter a config or a status count: a port's or flow's
//! generation or deletion, a gateway pod's node, IP, phase, readiness or
//! restarts, a node's labels or allocatable resources, a ConfigMap whose data
//! is not what the operator wrote. The operator's own status, finalizer and
//! ConfigMap writes therefore do not start another pass.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};

use super::config_maps;
use super::context::{Context, MANAGED_BY};
use crate::crd::{DaqiriFlow, DaqiriPort};

/// Why a pass should run: the kind and name of what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// `DaqiriPort`, `Pod`, ... or `Resync`.
    pub kind: &'static str,
    /// The object's name; `*` after a (re)list.
    pub name: String,
}

impl Trigger {
    /// The periodic safety-net pass.
    pub fn resync() -> Self {
        Self { kind: "Resync", name: "*".to_owned() }
    }
}

/// Every watch the controller needs, merged.
pub fn all(ctx: &Arc<Context>) -> BoxStream<'static, Trigger> {
    let (client, namespace) = (ctx.client.clone(), ctx.namespace.as_str());
    let managed = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let drift_ctx = Arc::clone(ctx);
    let deleted_ctx = Arc::clone(ctx);
    futures::stream::select_all([
        // Metadata only: a port or flow this build cannot decode must not stop
        // the watch (the pass reports it), and generation and deletion are all
        // that matter here.
        watch(
            watcher::watcher(Api::<PartialObjectMeta<DaqiriPort>>::namespaced(client.clone(), namespace), everything()),
            "DaqiriPort",
            |p| Some(resource_key(p)),
        ),
        watch(
            watcher::watcher(Api::<PartialObjectMeta<DaqiriFlow>>::namespaced(client.clone(), namespace), everything()),
            "DaqiriFlow",
            |f| Some(resource_key(f)),
        ),
        watch(
            watcher::watcher(
                Api::<Pod>::namespaced(client.clone(), namespace),
                watcher::Config::default().labels(&ctx.options.gateway_selector),
            ),
            "Pod",
            |p| Some(pod_key(p)),
        ),
        watch(watcher::watcher(Api::<Node>::all(client.clone()), everything()), "Node", |n| Some(node_key(n))),
        watch_with_deletes(
            watcher::watcher(
                Api::<ConfigMap>::namespaced(client, namespace),
                watcher::Config::default().labels(&managed),
            ),
            "ConfigMap",
            move |cm| config_maps::drift(&drift_ctx, cm),
            move |cm| config_maps::expected(&deleted_ctx, &cm.name_any()),
        ),
    ])
    .boxed()
}

fn everything() -> watcher::Config {
    watcher::Config::default()
}

/// A watch whose deletions always trigger.
fn watch<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    kind: &'static str,
    key: impl Fn(&K) -> Option<u64> + Send + 'static,
) -> BoxStream<'static, Trigger>
where
    K: Resource + Clone + Debug + Send + 'static,
{
    watch_with_deletes(events, kind, key, |_| true)
}

/// Maps a watch to triggers. `key` summarises what matters of an object
/// (`None`: nothing to do for it now); an applied object triggers when its key
/// differs from the last one seen, a deleted one when `on_delete` says so.
/// A (re)list triggers once, when it is complete.
fn watch_with_deletes<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    kind: &'static str,
    key: impl Fn(&K) -> Option<u64> + Send + 'static,
    on_delete: impl Fn(&K) -> bool + Send + 'static,
) -> BoxStream<'static, Trigger>
where
    K: Resource + Clone + Debug + Send + 'static,
{
    let mut seen: HashMap<String, u64> = HashMap::new();
    events
        .default_backoff()
        .filter_map(move |event| {
            let trigger = |name: String| Some(Trigger { kind, name });
            let result = match event {
                Ok(Event::Apply(object)) => {
                    let name = object.name_any();
                    match key(&object) {
                        Some(k) if seen.insert(name.clone(), k) != Some(k) => trigger(name),
                        Some(_) => None,
                        None => {
                            seen.remove(&name);
                            None
                        }
                    }
                }
                Ok(Event::Delete(object)) => {
                    let name = object.name_any();
                    seen.remove(&name);
                    if on_delete(&object) { trigger(name) } else { None }
                }
                Ok(Event::Init) => {
                    seen.clear();
                    None
                }
                Ok(Event::InitApply(object)) => {
                    if let Some(k) = key(&object) {
                        seen.insert(object.name_any(), k);
                    }
                    None
                }
                Ok(Event::InitDone) => trigger("*".to_owned()),
                Err(e) => {
                    tracing::warn!(kind, "watch failed, retrying: {e}");
                    None
                }
            };
            futures::future::ready(result)
        })
        .boxed()
}

fn hash_of(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// A spec change bumps the generation; a deletion sets the timestamp.
/// Status and finalizer writes change neither.
fn resource_key<K: Resource>(object: &K) -> u64 {
    hash_of((object.meta().generation, object.meta().deletion_timestamp.is_some()))
}

/// What a pass reads of a gateway pod: where it runs, its address, and
/// whether it is up; a restart (new container) needs its captures again.
fn pod_key(pod: &Pod) -> u64 {
    let spec_node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone());
    let ip = status.and_then(|s| s.pod_ip.clone());
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready").map(|c| c.status.clone()));
    let restarts: i32 =
        status.and_then(|s| s.container_statuses.as_ref()).map_or(0, |c| c.iter().map(|c| c.restart_count).sum());
    hash_of((pod.uid(), spec_node, phase, ip, ready, restarts, pod.meta().deletion_timestamp.is_some()))
}

/// Labels (port node selectors) and allocatable resources (SR-IOV VFs);
/// not the heartbeats that update a Node every few seconds.
fn node_key(node: &Node) -> u64 {
    let allocatable: Vec<(String, String)> = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .map(|a| a.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default();
    hash_of((node.labels(), allocatable))
}
