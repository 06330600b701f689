//! `/api/v1/interfaces/{name}/flows`: list an interface's RX flows, add one
//! and delete one while traffic runs (DAQIRI's dynamic flows, up to the
//! interface's `rx.dynamic_flow_capacity`).
//!
//! A flow is the same JSON object as an `rx.flows` entry of the config. Added
//! flows are programmed where the engine steers (rte_flow on DPDK, the
//! software table elsewhere), stay in place across config reloads that still
//! allow them, and are added again after a reload that restarts the engine.
//! The config text (`GET /api/v1/config`) stays the one that was applied.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use daqiri::Engine;
use daqiri::config::model::Flow;
use serde::Serialize;
use utoipa::ToSchema;

use super::{AdminState, ApiError};

/// An interface's RX flows.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowList {
    /// The interface.
    interface: String,
    /// The config's `rx.dynamic_flow_capacity` (0: DAQIRI's default).
    dynamic_flow_capacity: u32,
    /// How many flows may be added at runtime: the capacity, or the
    /// engine's own bound where it is 0; 0 when the interface takes none
    /// (socket streams).
    runtime_flow_limit: u32,
    /// The flows in match order: the config's, then those added at runtime.
    flows: Vec<FlowEntry>,
}

/// One RX flow.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowEntry {
    /// The flow as a config entry (`name`, `id`, `action`/`actions`, `match`).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    flow: Flow,
    /// Whether it was added at runtime (through this API or the engine's `add_flow`).
    added_at_runtime: bool,
}

/// The flow a request body holds: 413 past the body limit, 400 for what is
/// not a flow, and 400 naming any field a flow does not have (an ignored
/// field would change nothing the client asked for).
fn flow_of(body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>) -> Result<Flow, ApiError> {
    let Json(value) = body.map_err(|e| {
        let status = if e.status() == StatusCode::PAYLOAD_TOO_LARGE { e.status() } else { StatusCode::BAD_REQUEST };
        ApiError::new(status, e.body_text(), Some("body"))
    })?;
    let mut unknown = Vec::new();
    let flow: Flow = serde_ignored::deserialize(value, |path| unknown.push(path.to_string()))
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("the body is not a flow: {e}"), Some("body")))?;
    if let Some(field) = unknown.first() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("a flow has no field \"{field}\" (it has name, id, action or actions, and match)"),
            Some("body"),
        ));
    }
    Ok(flow)
}

/// The interface's RX flows.
#[utoipa::path(get, path = "/api/v1/interfaces/{name}/flows", tag = "flows",
    params(("name" = String, Path, description = "interface name")),
    responses((status = 200, body = FlowList), (status = 404, body = super::error::ApiErrorBody)))]
pub(crate) async fn list_flows(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<FlowList>, ApiError> {
    let engine = state.engine()?;
    Ok(Json(flow_list(&engine, port_named(&engine, &name)?)?))
}

/// Adds an RX flow (a config `rx.flows` entry as JSON; needs the token when one is set).
#[utoipa::path(post, path = "/api/v1/interfaces/{name}/flows", tag = "flows",
    params(("name" = String, Path, description = "interface name")),
    request_body(content = Object, description = "an rx.flows entry: name, id, action or actions, match"),
    responses(
        (status = 201, body = FlowList, description = "added; the interface's flows now"),
        (status = 400, body = super::error::ApiErrorBody, description = "the body is not a flow, or has a field a flow does not have"),
        (status = 401, body = super::error::ApiErrorBody),
        (status = 404, body = super::error::ApiErrorBody),
        (status = 409, body = super::error::ApiErrorBody, description = "rx.dynamic_flow_capacity flows are already added"),
        (status = 413, body = super::error::ApiErrorBody, description = "the body is larger than the admin API takes"),
        (status = 422, body = super::error::ApiErrorBody, description = "the flow is invalid (its field is named), the interface takes no runtime flows, or the NIC refused it (the driver's reason)")
    ))]
pub(crate) async fn add_flow(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<FlowList>), ApiError> {
    let flow = flow_of(body)?;
    // Programming a NIC can take a while: keep it off the async workers.
    let list = tokio::task::spawn_blocking(move || {
        between_reloads(&state, &name, |engine, port| engine.add_flow(port, flow).map_err(ApiError::engine_refused))
    })
    .await
    .map_err(|e| ApiError::task_failed("adding the flow", e))??;
    Ok((StatusCode::CREATED, Json(list)))
}

/// Changes the runtime flows of interface `name` with `change`, and lists
/// them after. Under the lock a config change holds: a restart carries the
/// runtime flows it finds into the new engine, so a flow added (or deleted)
/// between its look and its stop would be lost (or come back) after the
/// answer said otherwise. A change under way is waited for.
fn between_reloads(
    state: &AdminState,
    name: &str,
    change: impl FnOnce(&Engine, u16) -> Result<(), ApiError>,
) -> Result<FlowList, ApiError> {
    let _serial = state.applying.lock().unwrap_or_else(|e| e.into_inner());
    let engine = state.engine()?;
    let port = port_named(&engine, name)?;
    change(&engine, port)?;
    flow_list(&engine, port)
}

/// Deletes an RX flow by id, whether configured or added at runtime (needs the token when one is set).
#[utoipa::path(delete, path = "/api/v1/interfaces/{name}/flows/{id}", tag = "flows",
    params(("name" = String, Path, description = "interface name"), ("id" = u32, Path, description = "flow id")),
    responses(
        (status = 200, body = FlowList, description = "deleted; the interface's flows now"),
        (status = 401, body = super::error::ApiErrorBody),
        (status = 404, body = super::error::ApiErrorBody, description = "no such interface or flow id"),
        (status = 422, body = super::error::ApiErrorBody, description = "the config needs the flow (a reorder plan names it) or the NIC refused the change")
    ))]
pub(crate) async fn delete_flow(
    State(state): State<Arc<AdminState>>,
    Path((name, id)): Path<(String, u32)>,
) -> Result<Json<FlowList>, ApiError> {
    let list = tokio::task::spawn_blocking(move || {
        between_reloads(&state, &name, |engine, port| {
            let config = engine.config();
            let rx = &config.config().interfaces[port as usize].rx;
            if !rx.iter().flat_map(|rx| &rx.flows).any(|f| f.id == id) {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!("interface \"{name}\" has no RX flow with id {id}"),
                    Some("id"),
                ));
            }
            engine.delete_flow(port, id).map(drop).map_err(ApiError::engine_refused)
        })
    })
    .await
    .map_err(|e| ApiError::task_failed("deleting the flow", e))??;
    Ok(Json(list))
}

fn port_named(engine: &Engine, name: &str) -> Result<u16, ApiError> {
    let config = engine.config();
    let port = config.config().interfaces.iter().position(|i| i.name == name).ok_or_else(|| {
        let names: Vec<&str> = config.config().interfaces.iter().map(|i| i.name.as_str()).collect();
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no interface \"{name}\"; interfaces: [{}]", names.join(", ")),
            Some("name"),
        )
    })?;
    Ok(port as u16)
}

fn flow_list(engine: &Engine, port: u16) -> Result<FlowList, ApiError> {
    let config = engine.config();
    let iface = &config.config().interfaces[port as usize];
    let added = engine.runtime_flows(port).map_err(ApiError::engine_refused)?;
    let flows = iface
        .rx
        .iter()
        .flat_map(|rx| &rx.flows)
        .map(|flow| FlowEntry { added_at_runtime: added.iter().any(|a| a.id == flow.id), flow: flow.clone() })
        .collect();
    Ok(FlowList {
        interface: iface.name.clone(),
        dynamic_flow_capacity: iface.rx.as_ref().map_or(0, |rx| rx.dynamic_flow_capacity),
        runtime_flow_limit: match &iface.rx {
            Some(rx) if config.backend(port as usize).is_raw() => rx.runtime_flow_limit(),
            _ => 0,
        },
        flows,
    })
}

/// Every interface's runtime flows, by interface name, before a restart.
pub(crate) fn runtime_flows_of(engine: &Engine) -> Vec<(String, Flow)> {
    let config = engine.config();
    config
        .interfaces()
        .flat_map(|(port, iface)| {
            let flows = engine.runtime_flows(port as u16).unwrap_or_default();
            flows.into_iter().map(|flow| (iface.name.clone(), flow))
        })
        .collect()
}

/// Adds `flows` to the restarted `engine`; one the new config does not allow is logged and left out.
pub(crate) fn restore_runtime_flows(engine: &Engine, flows: Vec<(String, Flow)>) {
    for (interface, flow) in flows {
        let name = flow.name.clone();
        let added = port_named(engine, &interface)
            .map_err(|e| e.body.message)
            .and_then(|port| engine.add_flow(port, flow).map_err(|e| e.detail()));
        if let Err(why) = added {
            tracing::warn!(%interface, flow = %name, "a flow added at runtime is not carried over the restart: {why}");
        }
    }
}
