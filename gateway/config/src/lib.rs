//! The DAQIRI v1 configuration format.
//!
//! A DAQIRI YAML file is read in two steps, as DAQIRI users expect from
//! `daqiri_init`: [`Document::parse`] maps the YAML onto typed structs (type
//! errors name their YAML path), then [`EngineConfig::validate`] checks every
//! cross-reference and constraint at once and returns a [`ValidConfig`], the
//! only form the engine accepts.
//!
//! ```
//! let yaml = r#"
//! daqiri:
//!   cfg:
//!     version: 1
//!     stream_type: socket
//!     memory_regions:
//!     - { name: rx, kind: host, num_bufs: 1024, buf_size: 2048 }
//!     interfaces:
//!     - name: udp_in
//!       socket_config: { mode: server, local_addr: "udp://127.0.0.1:5001" }
//!       rx:
//!         queues:
//!         - { name: q0, id: 0, cpu_core: 0, batch_size: 32, memory_regions: [rx] }
//! "#;
//! let doc = daqiri_config::Document::parse(yaml).unwrap();
//! let valid = doc.config.validate().unwrap();
//! assert_eq!(valid.config().interfaces[0].name, "udp_in");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod device_resource;
mod diagnostic;
mod document;
mod endpoint;
pub mod key_table;
pub mod model;
pub mod nesting;
mod number_syntax;
pub mod placeholder;
pub mod pools;
mod rdma_bench;
mod schema_at;
#[cfg(feature = "testing")]
pub mod testing;
mod valid;
mod validate;

pub use diagnostic::{Diagnostic, Report, Severity, YamlPath};
pub use document::{Document, Strictness, TemplateCheck};
pub use endpoint::{Endpoint, Transport};
pub use model::EngineConfig;
pub use nesting::read_text;
pub use placeholder::Placeholder;
pub use valid::{InterfaceBackend, Link, SocketEndpoints, ValidConfig};
pub use validate::limits;

/// The JSON Schema of a DAQIRI document's `daqiri:` section.
pub fn json_schema() -> schemars::Schema {
    schemars::schema_for!(model::DaqiriSection)
}
