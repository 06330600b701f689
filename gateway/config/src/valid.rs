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
    /// AF_XDP sockets on a netdev (`engine: af_xdp`).
    AfXdp,
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
            InterfaceBackend::AfXdp => "af_xdp",
        }
    }

    /// Whether it carries whole Ethernet frames (`stream_type: raw`).
    pub const fn is_raw(self) -> bool {
        matches!(
            self,
            InterfaceBackend::Dpdk
                | InterfaceBackend::IbverbsRaw
                | InterfaceBackend::SoftwareLoopback
                | InterfaceBackend::AfXdp
        )
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

/// What validation resolved for one interface: its backend, with the data
/// that backend needs, so nothing downstream checks it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "backend")]
pub enum Link {
    /// Kernel UDP or TCP sockets between these endpoints.
    Socket(SocketEndpoints),
    /// Software loopback: no device.
    SoftwareLoopback,
    /// A NIC or virtual device driven by DPDK, by its `address` as written
    /// (PCIe BDF, netdev name or DPDK vdev).
    Dpdk {
        /// The interface's `address`.
        address: String,
    },
    /// A NIC driven through raw ibverbs, by its `address`.
    IbverbsRaw {
        /// The interface's `address`.
        address: String,
    },
    /// RoCE queue pairs between these endpoints.
    Roce(SocketEndpoints),
    /// AF_XDP sockets on this netdev (the interface's `address`).
    AfXdp {
        /// The network interface's name.
        netdev: String,
    },
}

impl Link {
    /// The backend this link needs.
    pub const fn backend(&self) -> InterfaceBackend {
        match self {
            Link::Socket(_) => InterfaceBackend::Socket,
            Link::SoftwareLoopback => InterfaceBackend::SoftwareLoopback,
            Link::Dpdk { .. } => InterfaceBackend::Dpdk,
            Link::IbverbsRaw { .. } => InterfaceBackend::IbverbsRaw,
            Link::Roce(_) => InterfaceBackend::Roce,
            Link::AfXdp { .. } => InterfaceBackend::AfXdp,
        }
    }

    /// The resolved link of a validated interface; `None` when the endpoints
    /// its backend needs are missing (validation reported that as an error).
    pub(crate) fn resolve(
        backend: InterfaceBackend,
        endpoints: Option<SocketEndpoints>,
        address: &str,
    ) -> Option<Self> {
        Some(match backend {
            InterfaceBackend::Socket => Link::Socket(endpoints?),
            InterfaceBackend::Roce => Link::Roce(endpoints?),
            InterfaceBackend::SoftwareLoopback => Link::SoftwareLoopback,
            InterfaceBackend::Dpdk => Link::Dpdk { address: address.to_owned() },
            InterfaceBackend::IbverbsRaw => Link::IbverbsRaw { address: address.to_owned() },
            InterfaceBackend::AfXdp => Link::AfXdp { netdev: address.trim().to_owned() },
        })
    }
}

/// A configuration that passed validation. Only this type reaches the engine.
#[derive(Debug, Clone)]
pub struct ValidConfig {
    config: EngineConfig,
    links: Vec<Link>,
    warnings: Report,
}

impl ValidConfig {
    pub(crate) fn new(config: EngineConfig, links: Vec<Link>, warnings: Report) -> Self {
        Self { config, links, warnings }
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

    /// What interface `port` resolved to: its backend and that backend's data.
    pub fn link(&self, port: usize) -> &Link {
        &self.links[port]
    }

    /// The backend of interface `port`.
    pub fn backend(&self, port: usize) -> InterfaceBackend {
        self.links[port].backend()
    }

    /// The socket endpoints of interface `port`, for socket and RoCE interfaces.
    pub fn endpoints(&self, port: usize) -> Option<SocketEndpoints> {
        match &self.links[port] {
            Link::Socket(endpoints) | Link::Roce(endpoints) => Some(*endpoints),
            _ => None,
        }
    }

    /// Interfaces with their port id.
    pub fn interfaces(&self) -> impl Iterator<Item = (usize, &Interface)> {
        self.config.interfaces.iter().enumerate()
    }
}
