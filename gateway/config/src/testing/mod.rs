//! Typed configs for tests and benchmarks (feature `testing`): a config is
//! built from the model's own types, so a renamed key breaks the build, not
//! a test's YAML at run time, and every test reads what it varies.
//!
//! ```
//! use daqiri_config::testing::{TestConfig, rx};
//! let config = TestConfig::udp_server(5001)
//!     .region("mem", 1024, 2048)
//!     .rx_queue(rx(0, "mem").core(0).batch(32))
//!     .udp_flow(7, 0, 5001)
//!     .validate()
//!     .unwrap();
//! assert_eq!(config.config().interfaces[0].rx_queues().len(), 1);
//! ```

mod plan;
mod queue;

pub use plan::{PlanBuilder, plan};
pub use queue::{QueueBuilder, rx, tx};

use crate::model::{
    ActionType, BitField, CpuCore, DaqiriBody, DaqiriSection, EngineConfig, EngineKind, Flow, FlowAction, FlowMatch,
    Interface, Loopback, MemoryKind, MemoryRegion, PortMatch, RxConfig, SocketConfig, SocketMode, StreamType, TxConfig,
};
use crate::{Report, ValidConfig};

/// A one-interface config under construction.
#[derive(Debug, Clone)]
pub struct TestConfig {
    config: EngineConfig,
    /// The device argument that gives a DPDK vdev one queue per RX queue
    /// (`qpairs` of `net_af_packet`): the address gets as many as the
    /// config has RX queues when written.
    queues_arg: Option<&'static str>,
}

impl TestConfig {
    fn with(stream_type: StreamType, engine: Option<EngineKind>, interface: Interface) -> Self {
        let mut config = EngineConfig::new(stream_type, engine);
        config.interfaces.push(interface);
        Self { config, queues_arg: None }
    }

    fn interface(name: &str, address: &str) -> Interface {
        Interface {
            name: name.to_owned(),
            address: address.to_owned(),
            socket_config: None,
            roce_config: None,
            rx: None,
            tx: None,
        }
    }

    /// A socket interface `server` bound to `udp://127.0.0.1:port`.
    pub fn udp_server(port: u16) -> Self {
        Self::socket_server(&format!("udp://127.0.0.1:{port}"))
    }

    /// A socket interface `server` bound to `tcp://127.0.0.1:port`.
    pub fn tcp_server(port: u16) -> Self {
        Self::socket_server(&format!("tcp://127.0.0.1:{port}"))
    }

    /// A socket interface `server` bound to `udp://local`.
    pub fn udp_server_on(local: std::net::SocketAddr) -> Self {
        Self::socket_server(&format!("udp://{local}"))
    }

    /// A socket interface `server` bound to `tcp://local`.
    pub fn tcp_server_on(local: std::net::SocketAddr) -> Self {
        Self::socket_server(&format!("tcp://{local}"))
    }

    /// A socket interface `client` sending to `udp://remote`.
    pub fn udp_client(remote: std::net::SocketAddr) -> Self {
        Self::socket_client(&format!("udp://{remote}"))
    }

    /// A socket interface `client` connecting to `tcp://remote`.
    pub fn tcp_client(remote: std::net::SocketAddr) -> Self {
        Self::socket_client(&format!("tcp://{remote}"))
    }

    /// A RoCE interface `server` listening on `roce://local`, RC.
    pub fn roce_server(local: std::net::SocketAddr) -> Self {
        Self::socket_server(&format!("roce://{local}")).rc()
    }

    /// A RoCE interface `client` on `roce://local` connecting to `roce://remote`, RC.
    pub fn roce_client(local: std::net::IpAddr, remote: std::net::SocketAddr) -> Self {
        let mut built = Self::socket("client", SocketMode::Client, None, Some(&format!("roce://{remote}")));
        for interface in &mut built.config.interfaces {
            if let Some(socket) = &mut interface.socket_config {
                socket.local_addr = Some(format!("roce://{local}"));
            }
        }
        built.rc()
    }

    /// A RoCE interface `ingest` on `local`, its RX queue the ring that
    /// the sender at `peer` (queue pair `peer_qpn`) writes over `transport`.
    pub fn roce_ingest(
        local: std::net::IpAddr,
        (peer, peer_qpn): (std::net::IpAddr, u32),
        transport: crate::model::TransportMode,
    ) -> Self {
        let mut built = Self::socket_server(&format!("roce://{local}"));
        for interface in &mut built.config.interfaces {
            interface.name = "ingest".into();
            interface.roce_config = Some(crate::model::RoceConfig {
                transport_mode: transport,
                ingest: Some(crate::model::RoceIngest { peer_ip: peer, peer_qpn, peer_psn: 0, mtu: 1024 }),
            });
        }
        built
    }

    fn rc(mut self) -> Self {
        for interface in &mut self.config.interfaces {
            interface.roce_config =
                Some(crate::model::RoceConfig { transport_mode: crate::model::TransportMode::Rc, ingest: None });
        }
        self
    }

    fn socket_client(remote: &str) -> Self {
        Self::socket("client", SocketMode::Client, None, Some(remote))
    }

    fn socket_server(local: &str) -> Self {
        Self::socket("server", SocketMode::Server, Some(local), None)
    }

    fn socket(name: &str, mode: SocketMode, local: Option<&str>, remote: Option<&str>) -> Self {
        let mut interface = Self::interface(name, "");
        interface.socket_config = Some(SocketConfig {
            mode,
            local_addr: local.map(str::to_owned),
            remote_addr: remote.map(str::to_owned),
            local_ip: None,
            local_port: None,
            remote_ip: None,
            remote_port: None,
            max_payload_size: None,
        });
        Self::with(StreamType::Socket, None, interface)
    }

    /// A raw interface on software loopback: TX comes back on RX.
    pub fn loopback() -> Self {
        let mut config = Self::with(StreamType::Raw, None, Self::interface("loop", "loopback"));
        config.config.loopback = Loopback::Software;
        config
    }

    /// A raw interface on the DPDK device `address` (a vdev such as
    /// `net_af_packet0,iface=veth0`, or a PCI address).
    pub fn dpdk(address: &str) -> Self {
        Self::with(StreamType::Raw, Some(EngineKind::Dpdk), Self::interface("port", address))
    }

    /// A raw interface on DPDK's `net_af_packet` over netdev `netdev`,
    /// with one socket per RX queue the config ends up with.
    pub fn dpdk_af_packet(netdev: &str) -> Self {
        let mut config = Self::dpdk(&format!("net_af_packet0,iface={netdev},framecnt=8192"));
        config.queues_arg = Some("qpairs");
        config
    }

    /// A raw interface on netdev `netdev` through AF_XDP.
    pub fn af_xdp(netdev: &str) -> Self {
        Self::with(StreamType::Raw, Some(EngineKind::AfXdp), Self::interface("port", netdev))
    }

    /// A `host` region of `num_bufs` buffers of `buf_size` bytes.
    pub fn region(self, name: &str, num_bufs: u32, buf_size: u64) -> Self {
        self.region_of(name, MemoryKind::Host, num_bufs, buf_size)
    }

    /// A region of any kind, with affinity 0.
    pub fn region_of(self, name: &str, kind: MemoryKind, num_bufs: u32, buf_size: u64) -> Self {
        self.region_at(name, kind, 0, num_bufs, buf_size)
    }

    /// A region of any kind with its `affinity` (a GPU for `device`, a
    /// NUMA node otherwise).
    pub fn region_at(mut self, name: &str, kind: MemoryKind, affinity: u32, num_bufs: u32, buf_size: u64) -> Self {
        self.config.memory_regions.push(MemoryRegion {
            name: name.to_owned(),
            kind,
            affinity,
            access: Vec::new(),
            num_bufs,
            buf_size,
        });
        self
    }

    /// `rx_meta_buffers`.
    pub fn rx_meta_buffers(mut self, entries: u32) -> Self {
        self.config.rx_meta_buffers = Some(entries);
        self
    }

    /// `master_core`.
    pub fn master_core(mut self, core: u32) -> Self {
        self.config.master_core = Some(CpuCore(core));
        self
    }

    fn rx_config(&mut self) -> &mut RxConfig {
        self.config.interfaces[0].rx.get_or_insert_with(RxConfig::default)
    }

    /// Adds an RX queue.
    pub fn rx_queue(mut self, queue: QueueBuilder) -> Self {
        self.rx_config().queues.push(queue.0);
        self
    }

    /// Adds a TX queue.
    pub fn tx_queue(mut self, queue: QueueBuilder) -> Self {
        self.config.interfaces[0].tx.get_or_insert_with(TxConfig::default).queues.push(queue.0);
        self
    }

    /// A flow `id` steering UDP datagrams to port `udp_dst` into RX queue `queue`.
    pub fn udp_flow(self, id: u32, queue: u16, udp_dst: u16) -> Self {
        let matches = FlowMatch { udp_dst: Some(PortMatch { first: udp_dst, last: udp_dst }), ..FlowMatch::default() };
        self.flow(id, &[queue], matches)
    }

    /// A flow `id` steering UDP datagrams from port `udp_src` into RX queue `queue`.
    pub fn udp_src_flow(self, id: u32, queue: u16, udp_src: u16) -> Self {
        let matches = FlowMatch { udp_src: Some(PortMatch { first: udp_src, last: udp_src }), ..FlowMatch::default() };
        self.flow(id, &[queue], matches)
    }

    /// A flow `id` with `matches`, spread over `queues` (one: a `queue`
    /// action; several: RSS over them).
    pub fn flow(mut self, id: u32, queues: &[u16], matches: FlowMatch) -> Self {
        let action = FlowAction {
            kind: ActionType::Queue,
            id: (queues.len() == 1).then(|| queues[0]),
            ids: (queues.len() > 1).then(|| queues.to_vec()),
            vlan_id: None,
            pcp: None,
            dei: None,
            ethertype: None,
            tunnel: None,
        };
        self.rx_config().flows.push(Flow {
            name: format!("flow{id}"),
            id,
            action: Some(action),
            actions: None,
            matches: Some(matches),
        });
        self
    }

    /// `flow_isolation: true`.
    pub fn isolated(mut self) -> Self {
        self.rx_config().flow_isolation = true;
        self
    }

    /// A CPU reorder plan over `flow_ids` into `output_region`: each
    /// packet carries a 32-bit sequence number `sequence_at` bytes in (its
    /// headers before it), then the data the plan places;
    /// `packets_per_batch` packets per batch.
    pub fn cpu_reorder(
        self,
        name: &str,
        flow_ids: &[u32],
        output_region: &str,
        sequence_at: u32,
        packets_per_batch: u32,
    ) -> Self {
        let sequence = BitField { bit_offset: sequence_at * 8, bit_width: 32 };
        self.reorder(
            plan(name, flow_ids, output_region)
                .payload_at(sequence_at + 4)
                .packets_per_batch(sequence, packets_per_batch),
        )
    }

    /// Adds a reorder plan.
    pub fn reorder(mut self, plan: PlanBuilder) -> Self {
        self.rx_config().reorder_configs.push(plan.build());
        self
    }

    /// Appends `other`'s interfaces and regions (built the same way) to this
    /// config: a server and its client in one engine.
    pub fn and(mut self, other: TestConfig) -> Self {
        self.config.interfaces.extend(other.config.interfaces);
        for region in other.config.memory_regions {
            if !self.config.memory_regions.iter().any(|r| r.name == region.name) {
                self.config.memory_regions.push(region);
            }
        }
        self
    }

    /// Renames the (first) interface.
    pub fn interface_named(mut self, name: &str) -> Self {
        self.config.interfaces[0].name = name.to_owned();
        self
    }

    /// `tx_meta_buffers`.
    pub fn tx_meta_buffers(mut self, entries: u32) -> Self {
        self.config.tx_meta_buffers = Some(entries);
        self
    }

    /// The region named `name`, to change after the fact.
    pub fn region_mut(&mut self, name: &str) -> &mut MemoryRegion {
        self.config.memory_regions.iter_mut().find(|r| r.name == name).expect("a region of this name")
    }

    /// RX queues of the first interface.
    pub fn rx_queue_count(&self) -> usize {
        self.config.interfaces.first().and_then(|i| i.rx.as_ref()).map_or(0, |rx| rx.queues.len())
    }

    /// The model, for a test that changes what no method covers.
    pub fn model_mut(&mut self) -> &mut EngineConfig {
        &mut self.config
    }

    /// The config as DAQIRI YAML text.
    pub fn yaml(&self) -> String {
        let mut cfg = self.config.clone();
        if let Some(arg) = self.queues_arg {
            let interface = &mut cfg.interfaces[0];
            let queues = interface.rx.as_ref().map_or(0, |rx| rx.queues.len()).max(1);
            interface.address.push_str(&format!(",{arg}={queues}"));
        }
        let section = DaqiriSection { daqiri: DaqiriBody { cfg } };
        serde_yaml::to_string(&section).expect("the model serialises")
    }

    /// The config validated, through the same YAML text a user would write.
    pub fn validate(&self) -> Result<ValidConfig, Report> {
        crate::Document::parse(&self.yaml())?.validate()
    }
}
