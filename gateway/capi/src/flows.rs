//! DAQIRI's dynamic RX flows: `add_rx_flow_async`, `add_rx_flows_async`,
//! `delete_flow_async`, `poll_flow_op`, over the engine's runtime flows.
//!
//! A flow crosses the ABI as the YAML of one `rx.flows` entry without its
//! `id` (daqiri.h writes it from a `FlowRuleConfig`), so every field the
//! config takes is taken, and validated, as in a config file. The library
//! gives each flow an id unused on every port (DAQIRI's flow ids are
//! global: `delete_flow_async` takes only the id). The engine applies a
//! flow at once; the call's completion waits in a queue for `poll_flow_op`,
//! as DAQIRI's do. A flow refused by validation or the NIC is refused by the
//! call itself, naming the field; in a batch, the completion says which
//! flows went in (their ids) and which did not (0).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_char;
use std::sync::Mutex;

use daqiri::{Engine, Error, Status};
use daqiri_config::model::Flow;

use crate::args::port_id;
use crate::lifecycle::{text, with_engine};
use crate::status::{self, SUCCESS, status_of};

/// `daqiri_gw_flow_op.type` (DAQIRI's `FlowOpType`).
const ADD_RX: i32 = 0;
const ADD_RX_BATCH: i32 = 1;
const DELETE: i32 = 2;

/// A finished flow operation, as `poll_flow_op` reports it (c_api.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct FlowOp {
    /// The id the call returned.
    pub op_id: u64,
    /// ADD_RX (0), ADD_RX_BATCH (1) or DELETE (2).
    pub kind: i32,
    /// How it ended.
    pub status: i32,
    /// The flow added or deleted (a batch: its first).
    pub flow_id: u32,
    /// A batch's flows, whose ids `poll_flow_op` copies out.
    pub num_flows: u32,
}

#[derive(Debug, Default)]
struct Flows {
    /// The engine these flows and completions belong to.
    engine: Option<daqiri::EngineId>,
    next_op: u64,
    /// Flows this API added and not yet deleted: id to port.
    added: BTreeMap<u32, u16>,
    done: VecDeque<(FlowOp, Vec<u32>)>,
}

static FLOWS: Mutex<Flows> =
    Mutex::new(Flows { engine: None, next_op: 0, added: BTreeMap::new(), done: VecDeque::new() });

/// The flows and completions of `engine`: those of an engine since shut
/// down are forgotten.
fn flows(engine: &Engine) -> std::sync::MutexGuard<'static, Flows> {
    let mut state = FLOWS.lock().unwrap_or_else(|e| e.into_inner());
    if state.engine != Some(engine.id()) {
        *state = Flows { engine: Some(engine.id()), ..Flows::default() };
    }
    state
}

/// The lowest id no flow of any port has.
fn free_id(engine: &Engine, taken: &BTreeMap<u32, u16>) -> u32 {
    let config = engine.config();
    let used: std::collections::BTreeSet<u32> = config
        .config()
        .interfaces
        .iter()
        .filter_map(|i| i.rx.as_ref())
        .flat_map(|rx| rx.flows.iter().map(|f| f.id))
        .chain(taken.keys().copied())
        .collect();
    (1..).find(|id| !used.contains(id)).expect("fewer than 2^32 flows")
}

/// One flow's YAML (an `rx.flows` entry without `id`) with `id` given.
fn parse(yaml: &str, id: u32) -> daqiri::Result<Flow> {
    let mut value: serde_yaml::Value =
        serde_yaml::from_str(yaml).map_err(|e| Error::invalid(format!("the flow is not YAML: {e}")))?;
    let map = value.as_mapping_mut().ok_or_else(|| Error::invalid("the flow is not a mapping of rx.flows keys"))?;
    if map.contains_key("id") {
        return Err(Error::invalid("the flow names an id: the library gives dynamic flows theirs"));
    }
    map.insert("id".into(), id.into());
    let unnamed = map.get("name").and_then(serde_yaml::Value::as_str).is_none_or(str::is_empty);
    if unnamed {
        map.insert("name".into(), format!("dynamic_flow_{id}").into());
    }
    serde_yaml::from_value(value).map_err(|e| Error::invalid(format!("the flow: {e}")))
}

/// Adds `yamls` to `port` in order, stopping at the first refusal: the ids
/// given (0 from the refused one on), and the refusal.
fn add_all(port: u16, yamls: &[&str]) -> daqiri::Result<(Vec<u32>, Option<Error>)> {
    with_engine(|engine| {
        let mut state = flows(engine);
        let mut ids = vec![0; yamls.len()];
        for (slot, yaml) in ids.iter_mut().zip(yamls) {
            let id = free_id(engine, &state.added);
            if let Err(e) = parse(yaml, id).and_then(|flow| engine.add_flow(port, flow)) {
                return Ok((ids, Some(e)));
            }
            state.added.insert(id, port);
            *slot = id;
        }
        Ok((ids, None))
    })
}

fn complete(engine: &Engine, kind: i32, status: i32, ids: Vec<u32>) -> u64 {
    let mut state = flows(engine);
    state.next_op += 1;
    let op = FlowOp {
        op_id: state.next_op,
        kind,
        status,
        flow_id: ids.first().copied().unwrap_or(0),
        num_flows: ids.len() as u32,
    };
    state.done.push_back((op, ids));
    op.op_id
}

fn write_op(call: &str, op_id: *mut u64, id: u64) -> i32 {
    if op_id.is_null() {
        return status::fail(call, Error::new(Status::NullPtr, "op_id is a null pointer"));
    }
    // SAFETY: non-null, a writable uint64_t* by the C contract.
    unsafe { *op_id = id };
    SUCCESS
}

/// Adds `n` flows (each the YAML of an `rx.flows` entry without `id`) to
/// `port`; one completion for all, ADD_RX for one and ADD_RX_BATCH for
/// more. A single flow that is refused is refused here; in a batch, the
/// flows before the refused one stay and the completion names which.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_add_rx_flows(
    port: i32,
    flows_yaml: *const *const c_char,
    n: usize,
    op_id: *mut u64,
) -> i32 {
    const CALL: &str = "add_rx_flows_async";
    if n == 0 || flows_yaml.is_null() {
        return status::fail(CALL, Error::invalid("no flows to add"));
    }
    // SAFETY: non-null and `n` C strings by the C contract.
    let pointers = unsafe { std::slice::from_raw_parts(flows_yaml, n) };
    let yamls: daqiri::Result<Vec<&str>> =
        pointers.iter().enumerate().map(|(i, &p)| text(&format!("flow {i}"), p)).collect();
    let added = yamls.and_then(|yamls| Ok((port_id(port)?, yamls))).and_then(|(port, yamls)| add_all(port, &yamls));
    match added {
        Err(e) => status::fail(CALL, e),
        Ok((_, Some(e))) if n == 1 => status::fail(CALL, e),
        Ok((ids, refused)) => {
            let kind = if n == 1 { ADD_RX } else { ADD_RX_BATCH };
            let ended = match refused {
                Some(e) => status::fail(CALL, e),
                None => SUCCESS,
            };
            match with_engine(|engine| Ok(complete(engine, kind, ended, ids))) {
                Ok(op) => write_op(CALL, op_id, op),
                Err(e) => status::fail(CALL, e),
            }
        }
    }
}

/// Deletes a flow this API added; static flows of the config, and ids it
/// did not give, are `INVALID_PARAMETER`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_delete_flow(flow_id: u32, op_id: *mut u64) -> i32 {
    const CALL: &str = "delete_flow_async";
    let deleted = with_engine(|engine| {
        let port = flows(engine).added.get(&flow_id).copied().ok_or_else(|| {
            Error::invalid(format!(
                "flow {flow_id} was not added by add_rx_flow_async (or is deleted already): static flows stay"
            ))
        })?;
        engine.delete_flow(port, flow_id)?;
        flows(engine).added.remove(&flow_id);
        Ok(complete(engine, DELETE, SUCCESS, vec![flow_id]))
    });
    match deleted {
        Ok(op) => write_op(CALL, op_id, op),
        Err(e) => status::fail(CALL, e),
    }
}

/// The oldest finished flow operation, `NOT_READY` when none is; its flow
/// ids go to `flow_ids`. With room for fewer than it has, `*result` is
/// filled (`num_flows` says how many), the operation stays queued, and the
/// answer is `NO_SPACE_AVAILABLE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_poll_flow_op(result: *mut FlowOp, flow_ids: *mut u32, capacity: usize) -> i32 {
    const CALL: &str = "poll_flow_op";
    if result.is_null() {
        return status::fail(CALL, Error::new(Status::NullPtr, "result is a null pointer"));
    }
    let capacity = if flow_ids.is_null() { 0 } else { capacity };
    let finished = with_engine(|engine| {
        let mut state = flows(engine);
        let (op, ids) =
            state.done.front().ok_or_else(|| Error::new(Status::NotReady, "no flow operation has finished"))?;
        if ids.len() > capacity {
            // Left in the queue: the caller asks again with room for them all.
            return Ok((*op, None));
        }
        Ok(state.done.pop_front().map(|(op, ids)| (op, Some(ids))).expect("the front was there"))
    });
    let (op, ids) = match finished {
        Ok(finished) => finished,
        Err(e) => return status_of(CALL, Err(e)),
    };
    // SAFETY: non-null, a writable daqiri_gw_flow_op* by the C contract.
    unsafe { *result = op };
    let Some(ids) = ids else {
        return status::fail(
            CALL,
            Error::new(
                Status::NoSpaceAvailable,
                format!(
                    "operation {} has {} flow ids and flow_ids room for {capacity}: ask again with room",
                    op.op_id, op.num_flows
                ),
            ),
        );
    };
    if !ids.is_empty() {
        // SAFETY: `flow_ids` has room for `capacity` >= ids.len() ids by the C contract.
        unsafe { std::ptr::copy_nonoverlapping(ids.as_ptr(), flow_ids, ids.len()) };
    }
    SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_gets_its_id_from_the_library() {
        let flow = parse("name: f\naction: { type: queue, id: 1 }\nmatch: { udp_dst: 5000 }", 7).unwrap();
        assert_eq!((flow.id, flow.queue_ids()), (7, vec![1]));
        assert!(
            parse("name: f\nid: 3\naction: { type: queue, id: 1 }", 7).unwrap_err().detail().contains("names an id")
        );
        assert!(parse("- a list", 7).is_err());
        assert_eq!(parse("action: { type: queue, id: 0 }", 9).unwrap().name, "dynamic_flow_9");
    }
}
