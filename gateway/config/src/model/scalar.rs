//! Scalars that DAQIRI writes in more than one YAML shape.
//!
//! `cpu_core` is documented as a string but every published config writes an
//! integer (a queue's may be -1: unpinned); a UDP match port is either a
//! number or a `"first-last"` range string. Each gets one Rust type so the
//! rest of the crate never re-parses.

use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A CPU core index, written as `8` or `"8"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[schemars(with = "CpuCoreSchema")]
pub struct CpuCore(pub u32);

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only describes the accepted shapes to schemars
enum CpuCoreSchema {
    Index(u32),
    Text(String),
}

impl Serialize for CpuCore {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for CpuCore {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CoreVisitor;
        impl Visitor<'_> for CoreVisitor {
            type Value = CpuCore;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a CPU core index such as 8 or \"8\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CpuCore, E> {
                u32::try_from(v).map(CpuCore).map_err(|_| E::custom(format!("cpu core {v} is out of range")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CpuCore, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("cpu core {v} is negative; use a core index >= 0")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CpuCore, E> {
                v.trim()
                    .parse::<u32>()
                    .map(CpuCore)
                    .map_err(|_| E::custom(format!("cpu core \"{v}\" is not a core index; write a number such as 8")))
            }
        }
        d.deserialize_any(CoreVisitor)
    }
}

impl fmt::Display for CpuCore {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A queue's `cpu_core`: a core its worker is pinned to, or upstream's `-1`,
/// a thread the kernel schedules anywhere (socket queues only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(with = "QueueCoreSchema")]
pub enum QueueCore {
    /// `cpu_core: 8`: pinned to core 8.
    Pinned(CpuCore),
    /// `cpu_core: -1`: not pinned.
    Unpinned,
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only describes the accepted shapes to schemars
enum QueueCoreSchema {
    Index(#[schemars(range(min = -1))] i64),
    Text(String),
}

impl QueueCore {
    /// The core it is pinned to, if any.
    pub fn pinned(self) -> Option<CpuCore> {
        match self {
            Self::Pinned(core) => Some(core),
            Self::Unpinned => None,
        }
    }
}

impl Serialize for QueueCore {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Pinned(core) => core.serialize(s),
            Self::Unpinned => s.serialize_i64(-1),
        }
    }
}

impl<'de> Deserialize<'de> for QueueCore {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_yaml::Value::deserialize(d)?;
        match value.as_i64() {
            Some(-1) => Ok(Self::Unpinned),
            Some(negative) if negative < 0 => Err(de::Error::custom(format!(
                "cpu core {negative} is negative; use a core index >= 0, or -1 for an unpinned thread (socket queues)"
            ))),
            _ => CpuCore::deserialize(value).map(Self::Pinned).map_err(de::Error::custom),
        }
    }
}

impl fmt::Display for QueueCore {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::Pinned(core) => core.fmt(f),
            Self::Unpinned => f.write_str("-1 (unpinned)"),
        }
    }
}

/// A UDP port match: one port (`4096`) or an inclusive range (`"1000-1010"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(with = "PortMatchSchema")]
pub struct PortMatch {
    /// First port of the range (the port itself for a single port).
    pub first: u16,
    /// Last port of the range, inclusive.
    pub last: u16,
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only describes the accepted shapes to schemars
enum PortMatchSchema {
    Port(u16),
    Range(#[schemars(regex(pattern = r"^\s*\d{1,5}\s*(-\s*\d{1,5}\s*)?$"))] String),
}

impl PortMatch {
    /// A match on exactly one port.
    pub const fn single(port: u16) -> Self {
        Self { first: port, last: port }
    }

    /// Whether `port` falls in the range.
    pub const fn contains(&self, port: u16) -> bool {
        self.first <= port && port <= self.last
    }

    /// Whether two ranges share at least one port.
    pub const fn overlaps(&self, other: &PortMatch) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

impl fmt::Display for PortMatch {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.first == self.last { write!(f, "{}", self.first) } else { write!(f, "{}-{}", self.first, self.last) }
    }
}

impl Serialize for PortMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.first == self.last { s.serialize_u16(self.first) } else { s.collect_str(self) }
    }
}

impl<'de> Deserialize<'de> for PortMatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PortVisitor;
        impl Visitor<'_> for PortVisitor {
            type Value = PortMatch;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a UDP port (0-65535) or a range string such as \"1000-1010\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PortMatch, E> {
                u16::try_from(v)
                    .map(PortMatch::single)
                    .map_err(|_| E::custom(format!("port {v} is out of range 0-65535")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PortMatch, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("port {v} is out of range 0-65535")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PortMatch, E> {
                parse_port_range(v).map_err(E::custom)
            }
        }
        d.deserialize_any(PortVisitor)
    }
}

fn parse_port_range(text: &str) -> Result<PortMatch, String> {
    let port = |s: &str| {
        s.trim()
            .parse::<u16>()
            .map_err(|_| format!("\"{text}\" is not a port or port range; write 4096 or \"1000-1010\" (ports 0-65535)"))
    };
    let range = match text.split_once('-') {
        None => PortMatch::single(port(text)?),
        Some((first, last)) => PortMatch { first: port(first)?, last: port(last)? },
    };
    if range.first > range.last {
        return Err(format!("port range \"{text}\" is reversed; write the lower port first"));
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_match_accepts_numbers_and_ranges() {
        let p: PortMatch = serde_yaml::from_str("4096").unwrap();
        assert_eq!(p, PortMatch::single(4096));
        let r: PortMatch = serde_yaml::from_str("\"1000-1010\"").unwrap();
        assert_eq!((r.first, r.last), (1000, 1010));
        assert!(r.contains(1005) && !r.contains(1011));
        assert_eq!(r.to_string(), "1000-1010");
    }

    #[test]
    fn port_match_rejects_reversed_and_out_of_range() {
        let e = serde_yaml::from_str::<PortMatch>("\"10-1\"").unwrap_err().to_string();
        assert!(e.contains("reversed"), "{e}");
        let e = serde_yaml::from_str::<PortMatch>("70000").unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn cpu_core_accepts_int_and_numeric_string() {
        assert_eq!(serde_yaml::from_str::<CpuCore>("8").unwrap(), CpuCore(8));
        assert_eq!(serde_yaml::from_str::<CpuCore>("\"9\"").unwrap(), CpuCore(9));
        assert!(serde_yaml::from_str::<CpuCore>("\"core9\"").is_err());
    }
}
