//! Unsigned integers in the CRD schemas, as the API server understands
//! them. schemars writes Rust's `u8`..`u64` as `format: uint32` and the
//! like, which the server does not know: it warns on every apply and
//! bounds nothing, so `id: 4294967296` is stored and every later list the
//! operator decodes fails on it. Each becomes a format the server knows
//! (`int32` or `int64`) with the type's range as `minimum` and `maximum`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// `crd` with every unsigned format replaced by its bounds.
pub(super) fn bounded(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(crd).expect("a CRD serialises");
    bound_unsigned(&mut value);
    serde_json::from_value(value).expect("a CRD with bounded integers deserialises")
}

/// The server's format and the largest value of an unsigned format;
/// `None` as the largest where `int64` itself is the bound (Kubernetes
/// stores integers as int64, so a `u64` field holds what it can store).
fn range_of(format: &str) -> Option<(&'static str, Option<u64>)> {
    Some(match format {
        "uint8" => ("int32", Some(u8::MAX.into())),
        "uint16" => ("int32", Some(u16::MAX.into())),
        "uint32" => ("int64", Some(u32::MAX.into())),
        "uint64" | "uint" => ("int64", None),
        _ => return None,
    })
}

fn bound_unsigned(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let unsigned = map.get("format").and_then(Value::as_str).and_then(range_of);
            if let Some((format, max)) = unsigned {
                map.insert("format".into(), json!(format));
                let lower = map.get("minimum").and_then(Value::as_f64).is_none_or(|m| m < 0.0);
                if lower {
                    map.insert("minimum".into(), json!(0));
                }
                if let Some(max) = max
                    && map.get("maximum").and_then(Value::as_f64).is_none_or(|m| m > max as f64)
                {
                    map.insert("maximum".into(), json!(max));
                }
            }
            map.values_mut().for_each(bound_unsigned);
        }
        Value::Array(items) => items.iter_mut().for_each(bound_unsigned),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_formats_become_bounds_and_tighter_bounds_stay() {
        let mut schema = json!({
            "properties": {
                "id": {"type": "integer", "format": "uint32", "minimum": 0.0},
                "width": {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 64},
                "port": {"type": "integer", "format": "uint16"},
                "format": {"type": "string"},
                "list": {"type": "array", "items": {"type": "integer", "format": "uint64"}},
                "signed": {"type": "integer", "format": "int64"}
            }
        });
        bound_unsigned(&mut schema);
        let p = &schema["properties"];
        assert_eq!(p["id"], json!({"type": "integer", "format": "int64", "minimum": 0.0, "maximum": 4294967295u64}));
        assert_eq!(p["width"], json!({"type": "integer", "format": "int64", "minimum": 1, "maximum": 64}));
        assert_eq!(p["port"]["maximum"], json!(65535));
        assert_eq!(p["format"], json!({"type": "string"}), "a field named format is not a format");
        assert_eq!(p["list"]["items"], json!({"type": "integer", "format": "int64", "minimum": 0}));
        assert_eq!(p["signed"], json!({"type": "integer", "format": "int64"}));
    }
}
