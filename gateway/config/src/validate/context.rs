//! What the per-interface rules share: the interface, what its backend
//! resolved to, and where it sits in the YAML.

use crate::diagnostic::YamlPath;
use crate::endpoint::Transport;
use crate::model::{EngineConfig, Interface};
use crate::valid::{InterfaceBackend, SocketEndpoints};

/// What the per-interface rules need to know.
pub(super) struct InterfaceCtx<'a> {
    pub config: &'a EngineConfig,
    pub iface: &'a Interface,
    pub backend: InterfaceBackend,
    pub endpoints: Option<SocketEndpoints>,
    pub path: YamlPath,
}

impl InterfaceCtx<'_> {
    pub fn is_raw(&self) -> bool {
        self.backend.is_raw()
    }

    pub fn transport(&self) -> Option<Transport> {
        self.endpoints.map(|e| e.transport)
    }
}
