//! An in-memory Kubernetes API server for the controller's tests: it holds
//! objects across calls and serves what the operator uses, as the real one
//! does: list and watch (with label and field selectors), get, create,
//! replace, merge and apply patches, the status subresource,
//! resourceVersion preconditions (409), finalizers and deletion timestamps,
//! generation bumps on spec changes. Every request is recorded.
//!
//! Hand-written because no crate compatible with kube 5 fakes a stateful API
//! with watches (kube's own tests script request by request, as
//! `tower-test` does).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::client::Body;
use serde_json::{Value, json};

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: Method,
    pub path: String,
    pub body: Value,
}

/// A write another client makes just before a matching request is served.
type Interference = (Method, String, Value);

#[derive(Debug, Default)]
struct Store {
    interferences: Vec<Interference>,
    resource_version: u64,
    uid: u64,
    /// By (collection path, name).
    objects: BTreeMap<(String, String), Value>,
    /// (resourceVersion, collection, event type, object).
    log: Vec<(u64, String, &'static str, Value)>,
    calls: Vec<Call>,
}

/// The fake server; clone it freely, all clones share the store.
#[derive(Clone)]
pub struct FakeApi {
    store: Arc<Mutex<Store>>,
    changed: Arc<tokio::sync::Notify>,
}

type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// Collections whose objects have a status subresource (spec writes leave it alone).
fn has_status_subresource(collection: &str) -> bool {
    collection.contains("/apis/daqiri.nvidia.com/")
}

impl FakeApi {
    pub fn new() -> Self {
        Self { store: Arc::default(), changed: Arc::new(tokio::sync::Notify::new()) }
    }

    /// A kube client talking to this server.
    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Creates or replaces an object from outside (what `kubectl apply` or a kubelet would do).
    pub fn put(&self, collection: &str, object: Value) -> Value {
        let name = object["metadata"]["name"].as_str().expect("objects have names").to_owned();
        let mut store = self.store.lock().unwrap();
        let existing = store.objects.get(&(collection.to_owned(), name.clone())).cloned();
        let stored = match existing {
            Some(old) => store.write(collection, &name, merge_spec_change(&old, object), "MODIFIED"),
            None => store.create(collection, object),
        };
        drop(store);
        self.changed.notify_waiters();
        stored
    }

    /// Merges `patch` into a stored object from outside.
    pub fn patch(&self, collection: &str, name: &str, patch: &Value) -> Value {
        let mut store = self.store.lock().unwrap();
        let mut object = store.objects[&(collection.to_owned(), name.to_owned())].clone();
        let old = object.clone();
        json_merge(&mut object, patch);
        let stored = store.write(collection, name, merge_spec_change(&old, object), "MODIFIED");
        drop(store);
        self.changed.notify_waiters();
        stored
    }

    /// Deletes an object from outside, as the API would (finalizers hold it).
    pub fn delete(&self, collection: &str, name: &str) {
        let mut store = self.store.lock().unwrap();
        store.delete(collection, name);
        drop(store);
        self.changed.notify_waiters();
    }

    /// Before the next `method` request whose path ends with `suffix`, merges
    /// `patch` into that object as another client would (its resourceVersion
    /// moves on, so a write made with the old one must fail).
    pub fn interfere_before(&self, method: Method, suffix: &str, patch: Value) {
        self.store.lock().unwrap().interferences.push((method, suffix.to_owned(), patch));
    }

    /// A stored object.
    pub fn get(&self, collection: &str, name: &str) -> Option<Value> {
        self.store.lock().unwrap().objects.get(&(collection.to_owned(), name.to_owned())).cloned()
    }

    /// Every object of a collection.
    pub fn list(&self, collection: &str) -> Vec<Value> {
        let store = self.store.lock().unwrap();
        store.objects.iter().filter(|((c, _), _)| c == collection).map(|(_, o)| o.clone()).collect()
    }

    /// The requests so far that match `method` and whose path ends with `suffix`.
    pub fn calls(&self, method: &Method, suffix: &str) -> Vec<Call> {
        let store = self.store.lock().unwrap();
        store.calls.iter().filter(|c| c.method == method && c.path.ends_with(suffix)).cloned().collect()
    }

    async fn handle(&self, request: Request<Body>) -> Response<ResponseBody> {
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.unwrap_or_default();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).or_else(|_| serde_yaml::from_slice(&bytes)).unwrap_or(Value::Null)
        };
        let path = parts.uri.path().to_owned();
        let query = parts.uri.query().unwrap_or_default().to_owned();
        let content_type =
            parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        self.store.lock().unwrap().calls.push(Call {
            method: parts.method.clone(),
            path: path.clone(),
            body: body.clone(),
        });
        let params = parse_query(&query);
        let target = Target::parse(&path);
        self.interfere(&parts.method, &path, &target);
        let answer = match (&parts.method, &target.name) {
            (&Method::GET, None) if params.get("watch").is_some_and(|w| w == "true" || w == "1") => {
                return self.watch(target.collection, params);
            }
            (&Method::GET, None) => Ok(self.store.lock().unwrap().list(&target.collection, &params)),
            (&Method::GET, Some(name)) => self.store.lock().unwrap().get(&target.collection, name),
            (&Method::POST, None) => {
                let mut store = self.store.lock().unwrap();
                let name = body["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let mut body = body;
                if name.is_empty() {
                    let prefix = body["metadata"]["generateName"].as_str().unwrap_or("obj-").to_owned();
                    body["metadata"]["name"] = json!(format!("{prefix}{}", store.resource_version + 1));
                }
                let name = body["metadata"]["name"].as_str().unwrap().to_owned();
                if store.objects.contains_key(&(target.collection.clone(), name.clone())) {
                    Err(status(409, "AlreadyExists", &format!("{name} already exists")))
                } else {
                    Ok(store.create(&target.collection, body))
                }
            }
            (&Method::PUT, Some(name)) => self.store.lock().unwrap().replace(&target.collection, name, body),
            (&Method::PATCH, Some(name)) => {
                let apply = content_type.starts_with("application/apply-patch");
                self.store.lock().unwrap().patch(&target.collection, name, body, target.status, apply)
            }
            (&Method::DELETE, Some(name)) => {
                let mut store = self.store.lock().unwrap();
                match store.check_delete_preconditions(&target.collection, name, &body) {
                    Ok(()) => Ok(store.delete(&target.collection, name)),
                    Err(e) => Err(e),
                }
            }
            _ => Err(status(405, "MethodNotAllowed", &format!("{} {path}", parts.method))),
        };
        self.changed.notify_waiters();
        let (code, value) = match answer {
            Ok(v) => (StatusCode::OK, v),
            Err(e) => (StatusCode::from_u16(e["code"].as_u64().unwrap_or(500) as u16).unwrap(), e),
        };
        Response::builder()
            .status(code)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(&value).unwrap())).boxed_unsync())
            .unwrap()
    }

    fn interfere(&self, method: &Method, path: &str, target: &Target) {
        let mut store = self.store.lock().unwrap();
        let Some(at) =
            store.interferences.iter().position(|(m, suffix, _)| m == method && path.ends_with(suffix.as_str()))
        else {
            return;
        };
        let (_, _, patch) = store.interferences.remove(at);
        let name = target.name.clone().expect("interference on a named object");
        let mut object = store.objects[&(target.collection.clone(), name.clone())].clone();
        json_merge(&mut object, &patch);
        store.write(&target.collection, &name, object, "MODIFIED");
    }

    /// Streams the log's events after the asked resourceVersion, then new ones as they come.
    fn watch(&self, collection: String, params: BTreeMap<String, String>) -> Response<ResponseBody> {
        let from: u64 = params.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let api = self.clone();
        let events = futures::stream::unfold(from, move |mut after| {
            let (api, collection, params) = (api.clone(), collection.clone(), params.clone());
            async move {
                loop {
                    let notified = api.changed.notified();
                    let next = {
                        let store = api.store.lock().unwrap();
                        store
                            .log
                            .iter()
                            .find(|(rv, c, _, o)| *rv > after && *c == collection && selected(o, &params))
                            .cloned()
                    };
                    if let Some((rv, _, kind, object)) = next {
                        after = rv;
                        let mut line = serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap();
                        line.push(b'\n');
                        return Some((Ok::<_, Infallible>(http_body::Frame::data(Bytes::from(line))), after));
                    }
                    notified.await;
                }
            }
        });
        Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(BodyExt::boxed_unsync(StreamBody::new(events.boxed())))
            .unwrap()
    }
}

/// A path: the collection (everything up to the resource), the name, `/status`.
struct Target {
    collection: String,
    name: Option<String>,
    status: bool,
}

impl Target {
    fn parse(path: &str) -> Self {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        // api/v1/... or apis/group/version/...
        let base = if parts[0] == "api" { 2 } else { 3 };
        let namespaced = parts.get(base) == Some(&"namespaces") && parts.len() > base + 2;
        let resource_at = if namespaced { base + 2 } else { base };
        let collection = format!("/{}", parts[..=resource_at].join("/"));
        Self {
            collection,
            name: parts.get(resource_at + 1).map(|s| (*s).to_owned()),
            status: parts.get(resource_at + 2) == Some(&"status"),
        }
    }
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes()).into_owned().collect()
}

/// Equality label and field selectors, as the operator uses them.
fn selected(object: &Value, params: &BTreeMap<String, String>) -> bool {
    let labels = params.get("labelSelector").is_none_or(|s| {
        s.split(',').filter(|t| !t.is_empty()).all(|term| {
            let (k, v) = term.split_once('=').unwrap_or((term, ""));
            object["metadata"]["labels"][k] == json!(v)
        })
    });
    let fields = params.get("fieldSelector").is_none_or(|s| {
        s.split(',').filter(|t| !t.is_empty()).all(|term| match term.split_once('=') {
            Some(("metadata.name", v)) => object["metadata"]["name"] == json!(v),
            Some(("metadata.namespace", v)) => object["metadata"]["namespace"] == json!(v),
            _ => true,
        })
    });
    labels && fields
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": reason, "message": message, "code": code})
}

/// RFC 7386 JSON merge patch.
fn json_merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            json_merge(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// `new` with its generation bumped if its spec differs from `old`'s.
fn merge_spec_change(old: &Value, mut new: Value) -> Value {
    let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
    let bumped = if old["spec"] != new["spec"] { generation + 1 } else { generation };
    for key in ["uid", "creationTimestamp"] {
        if new["metadata"][key].is_null() {
            new["metadata"][key] = old["metadata"][key].clone();
        }
    }
    new["metadata"]["generation"] = json!(bumped);
    new
}

impl Store {
    fn create(&mut self, collection: &str, mut object: Value) -> Value {
        self.uid += 1;
        object["metadata"]["uid"] = json!(format!("uid-{}", self.uid));
        object["metadata"]["creationTimestamp"] = json!("2026-11-23T00:00:00Z");
        if object["metadata"]["generation"].is_null() {
            object["metadata"]["generation"] = json!(1);
        }
        if let Some(ns) = collection.split("/namespaces/").nth(1).and_then(|s| s.split('/').next()) {
            object["metadata"]["namespace"] = json!(ns);
        }
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        self.write(collection, &name, object, "ADDED")
    }

    fn write(&mut self, collection: &str, name: &str, mut object: Value, kind: &'static str) -> Value {
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        self.objects.insert((collection.to_owned(), name.to_owned()), object.clone());
        self.log.push((self.resource_version, collection.to_owned(), kind, object.clone()));
        object
    }

    fn list(&self, collection: &str, params: &BTreeMap<String, String>) -> Value {
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|((c, _), o)| c == collection && selected(o, params))
            .map(|(_, o)| o.clone())
            .collect();
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": self.resource_version.to_string()}, "items": items})
    }

    fn get(&self, collection: &str, name: &str) -> Result<Value, Value> {
        self.objects
            .get(&(collection.to_owned(), name.to_owned()))
            .cloned()
            .ok_or_else(|| status(404, "NotFound", &format!("{name} not found")))
    }

    /// 409 when `asked` names a resourceVersion other than the stored one.
    fn precondition(current: &Value, asked: &Value) -> Result<(), Value> {
        match asked.as_str() {
            Some(rv) if current["metadata"]["resourceVersion"] != json!(rv) => Err(status(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            )),
            _ => Ok(()),
        }
    }

    fn replace(&mut self, collection: &str, name: &str, body: Value) -> Result<Value, Value> {
        let current = self.get(collection, name)?;
        Self::precondition(&current, &body["metadata"]["resourceVersion"])?;
        Ok(self.write(collection, name, merge_spec_change(&current, body), "MODIFIED"))
    }

    fn patch(&mut self, collection: &str, name: &str, body: Value, status: bool, apply: bool) -> Result<Value, Value> {
        let current = match self.get(collection, name) {
            Ok(current) => current,
            Err(_) if apply && !status => return Ok(self.create(collection, body)),
            Err(e) => return Err(e),
        };
        Self::precondition(&current, &body["metadata"]["resourceVersion"])?;
        let mut patch = body;
        if let Some(meta) = patch["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
        }
        let mut object = current.clone();
        if status {
            json_merge(&mut object["status"], &patch["status"]);
        } else {
            if has_status_subresource(collection) {
                patch.as_object_mut().map(|p| p.remove("status"));
            }
            json_merge(&mut object, &patch);
        }
        let object = merge_spec_change(&current, object);
        let released = !object["metadata"]["deletionTimestamp"].is_null()
            && object["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty);
        if released {
            self.objects.remove(&(collection.to_owned(), name.to_owned()));
            self.resource_version += 1;
            self.log.push((self.resource_version, collection.to_owned(), "DELETED", object.clone()));
            return Ok(object);
        }
        if object == current {
            return Ok(current);
        }
        Ok(self.write(collection, name, object, "MODIFIED"))
    }

    fn check_delete_preconditions(&self, collection: &str, name: &str, body: &Value) -> Result<(), Value> {
        let current = self.get(collection, name)?;
        let pre = &body["preconditions"];
        if !pre["uid"].is_null() && pre["uid"] != current["metadata"]["uid"] {
            return Err(status(409, "Conflict", "uid precondition failed"));
        }
        Self::precondition(&current, &pre["resourceVersion"])
    }

    /// Deletes, or with finalizers marks for deletion (and bumps the generation).
    fn delete(&mut self, collection: &str, name: &str) -> Value {
        let key = (collection.to_owned(), name.to_owned());
        let Some(mut object) = self.objects.get(&key).cloned() else { return Value::Null };
        if object["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
            if object["metadata"]["deletionTimestamp"].is_null() {
                object["metadata"]["deletionTimestamp"] = json!("2026-11-23T00:00:01Z");
                let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
                object["metadata"]["generation"] = json!(generation + 1);
                return self.write(collection, name, object, "MODIFIED");
            }
            return object;
        }
        self.objects.remove(&key);
        self.resource_version += 1;
        self.log.push((self.resource_version, collection.to_owned(), "DELETED", object.clone()));
        object
    }
}
