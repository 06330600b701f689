//! Resources the server holds but this operator cannot read: written under
//! another version of the CRD's schema (an older chart's, before a bound was
//! added, or a newer one's field this build does not know). Listing a kind
//! reads each object on its own, so one such object is left out of every
//! config and marked `Degraded` (`Undecodable`, with the field the decoder
//! stopped at) while the rest of the namespace is reconciled as usual; one
//! being deleted loses the finalizer, as nothing of it was rendered.

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::Error;
use super::{status, writes};
use crate::crd::ResourceStatus;

/// One object that did not decode as its kind.
#[derive(Debug, Clone)]
pub struct Unreadable {
    /// `DaqiriPort` or `DaqiriFlow`.
    pub kind: String,
    /// Its kind's API.
    pub resource: ApiResource,
    /// The object as the server has it.
    pub object: DynamicObject,
    /// The decoder's message, with the path of the field it stopped at.
    pub error: String,
}

/// Every object of kind `K` in `namespace`, the ones that decode and the
/// ones that do not.
pub async fn list<K>(client: &Client, namespace: &str) -> Result<(Vec<K>, Vec<Unreadable>), kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let mut read = Vec::new();
    let mut unreadable = Vec::new();
    for object in api.list(&ListParams::default()).await?.items {
        let value = serde_json::to_value(&object).unwrap_or_default();
        match serde_path_to_error::deserialize::<_, K>(value) {
            Ok(typed) => read.push(typed),
            Err(e) => {
                let kind = K::kind(&()).into_owned();
                let error = format!("{} at {}", e.inner(), e.path());
                unreadable.push(Unreadable { kind, resource: resource.clone(), object, error });
            }
        }
    }
    Ok((read, unreadable))
}

/// Marks `unreadable` Degraded (a write conditional on the version read), or
/// drops its finalizer when it is being deleted.
pub async fn report(client: &Client, namespace: &str, unreadable: &Unreadable, now: Timestamp) -> Result<(), Error> {
    let object = &unreadable.object;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &unreadable.resource);
    let name = object.metadata.name.clone().unwrap_or_default();
    let what = format!("{} {name}", unreadable.kind);
    if object.metadata.deletion_timestamp.is_some() {
        return writes::release_finalizer(&api, object).await.map(|_| ()).map_err(|e| Error::from_write(what, e));
    }
    let previous: Option<ResourceStatus> = serde_json::from_value(object.data["status"].clone()).ok();
    let message = format!("this operator cannot read it: {}", unreadable.error);
    let desired = status::undecodable(object.metadata.generation, message, previous.as_ref(), now);
    if !status::differs(previous.as_ref(), &desired, now) {
        return Ok(());
    }
    let patch = json!({"metadata": {"resourceVersion": object.metadata.resource_version}, "status": desired});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| Error::from_write(what, e))
}
