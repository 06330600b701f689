//! Conditional writes: each carries the resourceVersion the pass read, so a
//! write over something that changed since fails with 409 and becomes
//! [`Error::Conflict`] (the worker runs a fresh pass).

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::FINALIZER;
use super::error::Error;

fn describe<K: Resource<DynamicType = ()>>(object: &K) -> String {
    format!("{} {}", K::kind(&()), object.name_any())
}

/// Merges `patch` into `object` (metadata, or the status subresource with
/// `status`), on the condition that it has not changed since it was read;
/// the local copy takes the answer.
pub async fn merge<K>(api: &Api<K>, object: &mut K, mut patch: serde_json::Value, status: bool) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    patch["metadata"]["resourceVersion"] = json!(object.resource_version());
    let name = object.name_any();
    let params = PatchParams::default();
    let answer = if status {
        api.patch_status(&name, &params, &Patch::Merge(&patch)).await
    } else {
        api.patch(&name, &params, &Patch::Merge(&patch)).await
    };
    *object = answer.map_err(|e| Error::from_write(describe(object), e))?;
    Ok(())
}

/// Deletes `object` unless it changed (or was replaced) since it was read;
/// one already gone is fine.
pub async fn delete_unchanged<K>(api: &Api<K>, object: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions { resource_version: object.resource_version(), uid: object.uid() }),
        ..DeleteParams::default()
    };
    match api.delete(&object.name_any(), &params).await {
        Ok(_) => {
            tracing::info!("deleted {}", describe(object));
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::from_write(describe(object), e)),
    }
}

/// Removes this operator's finalizer from `object`, a resource read as a
/// raw object, on the condition that it has not changed since it was read.
/// Whether it had the finalizer (nothing is written when it had not).
pub async fn release_finalizer(api: &Api<DynamicObject>, object: &DynamicObject) -> Result<bool, kube::Error> {
    let finalizers = object.metadata.finalizers.as_deref().unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        return Ok(false);
    }
    let kept: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
    let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": object.metadata.resource_version}});
    let name = object.metadata.name.as_deref().unwrap_or_default();
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(true)
}
