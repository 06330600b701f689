//! What the model's own JSON Schema says at a YAML path: the keys a map
//! takes (so a refused key's message lists them, and the one it was
//! probably meant to be) and whether a value may be an integer (so the
//! strict language knows where a number's syntax matters), without a second
//! list to keep in step with the model.

use std::sync::OnceLock;

use serde_json::Value;

/// The model's schema, as JSON, made once.
fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::to_value(crate::json_schema()).expect("a schema is JSON"))
}

/// The schema nodes `steps` lead to from the root, each `$ref` and
/// alternative followed.
fn nodes_at(steps: &[Step]) -> Vec<&'static Value> {
    let schema = schema();
    let mut nodes = vec![schema];
    for step in steps {
        nodes = nodes
            .into_iter()
            .flat_map(|node| variants(schema, node))
            .filter_map(|node| match step {
                Step::Key(key) => node.get("properties")?.get(key),
                Step::Index => node.get("items"),
            })
            .collect();
    }
    nodes.into_iter().flat_map(|node| variants(schema, node)).collect()
}

/// Every key path the schema describes, as diagnostics print paths with
/// `[]` for any item (`daqiri.cfg.interfaces[].rx.queues[].cpu_core`).
#[cfg(test)]
pub(crate) fn all_paths() -> Vec<String> {
    fn walk(schema: &'static Value, node: &'static Value, path: &str, out: &mut Vec<String>, depth: usize) {
        // The model nests about ten levels; the bound only guards a recursive schema.
        if depth > 16 {
            return;
        }
        for node in variants(schema, node) {
            if let Some(properties) = node.get("properties").and_then(Value::as_object) {
                for (key, child) in properties {
                    let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    out.push(at.clone());
                    walk(schema, child, &at, out, depth + 1);
                }
            }
            if let Some(items) = node.get("items").filter(|items| items.is_object()) {
                walk(schema, items, &format!("{path}[]"), out, depth + 1);
            }
        }
    }
    let mut out = Vec::new();
    walk(schema(), schema(), "", &mut out, 0);
    out.sort();
    out.dedup();
    out
}

/// The keys the map holding `path`'s last key takes (`path` as diagnostics
/// print it: `daqiri.cfg.interfaces[0].rx.flows[1].match.vlan_id`), sorted;
/// `None` where the schema does not say.
pub(crate) fn known_keys(path: &str) -> Option<Vec<String>> {
    let mut steps = steps(path);
    steps.pop(); // the unknown key itself
    let mut keys: Vec<String> = nodes_at(&steps)
        .into_iter()
        .filter_map(|node| node.get("properties")?.as_object())
        .flat_map(|properties| properties.keys().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    (!keys.is_empty()).then_some(keys)
}

/// Whether the value at `path` may be an integer (alone or beside another
/// shape, as a UDP port beside a range string).
pub(crate) fn takes_integer(path: &str) -> bool {
    let is_integer = |t: &Value| t.as_str() == Some("integer");
    nodes_at(&steps(path)).into_iter().any(|node| match node.get("type") {
        Some(Value::Array(types)) => types.iter().any(is_integer),
        Some(t) => is_integer(t),
        None => false,
    })
}

/// Of `known`, the key `unknown` was most likely meant to be: within two
/// edits, or sharing a long stem.
pub(crate) fn closest<'k>(unknown: &str, known: &'k [String]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(unknown, k), k))
        .filter(|&(distance, k)| distance <= 2.max(k.len() / 4))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, k)| k.as_str())
}

enum Step {
    Key(String),
    Index,
}

fn steps(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, indices) = part.split_once('[').map_or((part, ""), |(k, rest)| (k, rest));
        if !key.is_empty() {
            out.push(Step::Key(key.to_owned()));
        }
        out.extend(indices.split('[').filter(|i| !i.is_empty()).map(|_| Step::Index));
    }
    out
}

/// `node` and what it stands for: the definition a `$ref` names, and each
/// alternative of `anyOf` / `oneOf` / `allOf` (an optional field is
/// `anyOf: [its type, null]`).
fn variants<'s>(schema: &'s Value, node: &'s Value) -> Vec<&'s Value> {
    let mut out = Vec::new();
    let mut pending = vec![node];
    while let Some(node) = pending.pop() {
        if let Some(target) = node.get("$ref").and_then(Value::as_str) {
            if let Some(found) = target.strip_prefix("#/").and_then(|p| schema.pointer(&format!("/{p}"))) {
                pending.push(found);
            }
            continue;
        }
        for combinator in ["anyOf", "oneOf", "allOf"] {
            pending.extend(node.get(combinator).and_then(Value::as_array).into_iter().flatten());
        }
        out.push(node);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_models_schema_at_any_depth() {
        let queue = known_keys("daqiri.cfg.interfaces[0].rx.queues[1].cpu_cores").unwrap();
        assert!(queue.contains(&"cpu_core".to_owned()) && queue.contains(&"batch_size".to_owned()), "{queue:?}");
        let matches = known_keys("daqiri.cfg.interfaces[2].rx.flows[0].match.vlan_id").unwrap();
        assert!(matches.contains(&"udp_src".to_owned()) && matches.contains(&"ethernet".to_owned()), "{matches:?}");
        let cfg = known_keys("daqiri.cfg.flow_isolaton").unwrap();
        assert!(cfg.contains(&"memory_regions".to_owned()), "{cfg:?}");
        let rx = known_keys("daqiri.cfg.interfaces[0].rx.flow_isolaton").unwrap();
        assert_eq!(closest("flow_isolaton", &rx), Some("flow_isolation"));
        assert_eq!(closest("macth", &known_keys("daqiri.cfg.interfaces[0].rx.flows[0].macth").unwrap()), Some("match"));
        assert_eq!(closest("zzzzzz", &rx), None);
    }

    #[test]
    fn integers_are_known_where_the_model_takes_them() {
        assert!(takes_integer("daqiri.cfg.interfaces[0].rx.queues[1].cpu_core"));
        assert!(takes_integer("daqiri.cfg.interfaces[0].rx.flows[0].match.udp_src"), "a port beside a range string");
        assert!(takes_integer("daqiri.cfg.memory_regions[2].num_bufs"));
        assert!(!takes_integer("daqiri.cfg.memory_regions[2].name"));
        assert!(!takes_integer("daqiri.cfg.interfaces[0].address"));
        assert!(!takes_integer("daqiri.cfg.no_such_key"));
    }
}
