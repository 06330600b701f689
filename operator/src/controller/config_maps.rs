//! One ConfigMap per node, `<prefix>-<node>` with the key `config.yaml`, so
//! no object grows with the number of nodes (the API refuses objects over
//! 1 MiB). Each gateway pod's config agent follows its node's ConfigMap.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

use super::context::{Context, MANAGED_BY, MANAGER, NODE_LABEL};
use super::error::Error;
use super::writes;
use crate::render::{NodeConfig, Plan, sha256_hex};

/// The key holding a node's DAQIRI YAML.
pub const KEY: &str = "config.yaml";

/// Longest object name the API accepts.
const MAX_NAME: usize = 253;

/// The ConfigMap of `node`: `<prefix>-<node>`, or, where that would pass the
/// 253-character limit, a prefix of it and a hash of the node name.
pub fn name_for(prefix: &str, node: &str) -> String {
    let name = format!("{prefix}-{node}");
    if name.len() <= MAX_NAME {
        return name;
    }
    let hash = sha256_hex(node);
    let keep = MAX_NAME - 1 - 16;
    format!("{}-{}", name[..keep].trim_end_matches(['-', '.']), &hash[..16])
}

fn data_sha(config_map: &ConfigMap) -> String {
    sha256_hex(config_map.data.as_ref().and_then(|d| d.get(KEY)).map_or("", String::as_str))
}

/// Whether the operator means `name` to exist.
pub fn expected(ctx: &Context, name: &str) -> bool {
    ctx.expected_config_maps.lock().expect("not poisoned").contains_key(name)
}

/// A watch key for a managed ConfigMap: `None` when it holds what the
/// operator wrote (nothing to do), otherwise a hash of its data (drift, or a
/// ConfigMap that should not exist).
pub fn drift(ctx: &Context, config_map: &ConfigMap) -> Option<u64> {
    let sha = data_sha(config_map);
    let expected = ctx.expected_config_maps.lock().expect("not poisoned").get(&config_map.name_any()).cloned();
    (expected.as_deref() != Some(sha.as_str())).then(|| u64::from_str_radix(&sha[..16], 16).unwrap_or_default())
}

/// Writes the ConfigMaps of `plan`, deletes those of nodes without a config.
/// `existing` are the managed ConfigMaps as listed at the start of the pass;
/// every write carries the resourceVersion read there.
pub async fn apply(ctx: &Context, plan: &Plan, existing: &[ConfigMap]) -> Result<(), Error> {
    let desired: BTreeMap<String, &NodeConfig> =
        plan.configs.iter().map(|c| (name_for(&ctx.options.config_map, &c.node), c)).collect();
    *ctx.expected_config_maps.lock().expect("not poisoned") =
        desired.iter().map(|(name, c)| (name.clone(), c.sha256.clone())).collect();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    for (name, NodeConfig { node, yaml, sha256, .. }) in desired.iter().map(|(n, c)| (n, *c)) {
        let current = existing.iter().find(|c| &c.name_any() == name);
        if current.is_some_and(|c| data_sha(c) == *sha256) {
            continue;
        }
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ctx.namespace.clone()),
                labels: Some(
                    [(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()), (NODE_LABEL.to_owned(), label_value(node))]
                        .into(),
                ),
                annotations: Some([(NODE_LABEL.to_owned(), node.clone())].into()),
                // Present: the write fails (409) if the ConfigMap changed since the pass read it.
                resource_version: current.and_then(|c| c.resource_version()),
                ..ObjectMeta::default()
            },
            data: Some([(KEY.to_owned(), yaml.clone())].into()),
            ..ConfigMap::default()
        };
        api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&config_map))
            .await
            .map_err(|e| Error::from_write(format!("ConfigMap {name}"), e))?;
    }
    for stale in existing.iter().filter(|c| !desired.contains_key(&c.name_any())) {
        writes::delete_unchanged(&api, stale).await?;
    }
    Ok(())
}

/// A node name as a label value (63 characters at most): the name itself
/// when it fits, otherwise its hash. The annotation keeps the full name.
pub fn label_value(node: &str) -> String {
    if node.len() <= 63 { node.to_owned() } else { sha256_hex(node)[..63].to_owned() }
}
