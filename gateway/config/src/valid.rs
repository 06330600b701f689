//! The checked configuration: what validation proved, kept with the config.

use serde::Serialize;

use crate::diagnostic::{Diagnostic, Report};
use crate::endpoint::{Endpoint, Transport};
use crate::model::{EngineConfig, Interface, SocketMode};

/// Which backend drives an interface, resolved from `stream_type`, `engine`,
/// `loopback` and the endpoint schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InterfaceBackend {
    /// Kernel UDP or TCP sockets.
    Socket,
    /// Software loopback of raw frames (`loopback: "sw"`).
    SoftwareLoopback,
    /// DPDK poll-mode driver.
    Dpdk,
    /// Raw Ethernet through ibverbs striding RQs.
    IbverbsRaw,
    /// RoCE through ibverbs.
    Roce,
}

impl InterfaceBackend {
    /// Name used in metrics (`daqiri.engine`) and messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            InterfaceBackend::Socket => "socket",
            InterfaceBackend::SoftwareLoopback => "sw_loopback",
            InterfaceBackend::Dpdk => "dpdk",
            InterfaceBackend::IbverbsRaw => "ibverbs",
            InterfaceBackend::Roce => "roce",
        }
    }
}

/// Resolved socket endpoints of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SocketEndpoints {
    /// Client or server.
    pub mode: SocketMode,
    /// Transport shared by both ends.
    pub transport: Transport,
    /// Bind address.
    pub local: Option<Endpoint>,
    /// Peer address.
    pub remote: Option<Endpoint>,
}

/// A configuration that passed validation. Only this type reaches the engine.
#[derive(Debug, Clone)]
pub struct ValidConfig {
    config: EngineConfig,
    backends: Vec<InterfaceBackend>,
    endpoints: Vec<Option<SocketEndpoints>>,
    warnings: Report,
}

impl ValidConfig {
    pub(crate) fn new(
        config: EngineConfig,
        backends: Vec<InterfaceBackend>,
        endpoints: Vec<Option<SocketEndpoints>>,
        warnings: Report,
    ) -> Self {
        Self { config, backends, endpoints, warnings }
    }

    pub(crate) fn prepend_warnings(&mut self, mut first: Report) {
        first.extend(std::mem::take(&mut self.warnings));
        self.warnings = first;
    }

    /// The config as written (defaults are applied by accessor methods).
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Warnings found while validating.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings.diagnostics
    }

    /// The backend of interface `port`.
    pub fn backend(&self, port: usize) -> InterfaceBackend {
        self.backends[port]
    }

    /// The socket endpoints of interface `port`, for socket and RoCE interfaces.
    pub fn endpoints(&self, port: usize) -> Option<SocketEndpoints> {
        self.endpoints[port]
    }

    /// Interfaces with their port id.
    pub fn interfaces(&self) -> impl Iterator<Item = (usize, &Interface)> {
        self.config.interfaces.iter().enumerate()
    }
}
