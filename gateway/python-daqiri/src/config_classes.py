"""DAQIRI's config classes and enums for `import daqiri`.

Each class has DAQIRI's Python attribute names and defaults. One walk per
class (`_bind_*`) reads a tree libdaqiri parsed into the classes, or writes
the classes into a tree (`as_dict()`, which `daqiri_init` takes), so the
attribute a YAML key fills is the one written back to it; the C++ headers
walk the same keys (gateway/capi/include/daqiri/config_io.h). Writing leaves
out an optional attribute still at its default, as an unwritten key.
"""

import copy
import enum
import ipaddress

import yaml


class EngineType(enum.IntEnum):
    UNKNOWN = -1
    DEFAULT = 0
    DPDK = 1
    SOCKET = 2
    RDMA = 3
    IBVERBS = 4
    AFXDP = 100  # ours: an interface on the AF_XDP backend


MemoryKind = enum.IntEnum("MemoryKind", "HOST HOST_PINNED HUGE DEVICE INVALID", start=0)
StreamType = enum.IntEnum("StreamType", "RAW SOCKET INVALID", start=0)
SocketProtocol = enum.IntEnum("SocketProtocol", "TCP UDP ROCE INVALID", start=0)
Direction = enum.IntEnum("Direction", "RX TX TX_RX", start=0)
LoopbackType = enum.IntEnum("LoopbackType", "DISABLED LOOPBACK_TYPE_SW", start=0)
RDMAMode = enum.IntEnum("RDMAMode", "CLIENT SERVER INVALID", start=0)
RDMATransportMode = enum.IntEnum("RDMATransportMode", "RC UC UD INVALID", start=0)
SocketMode = enum.IntEnum("SocketMode", "CLIENT SERVER INVALID", start=0)
QueuePollMode = enum.IntEnum("QueuePollMode", "INDIRECT DIRECT INVALID", start=0)
FlowType = enum.IntEnum("FlowType", "QUEUE VLAN_PUSH VLAN_POP TUNNEL_ENCAP TUNNEL_DECAP", start=0)
TunnelType = enum.IntEnum("TunnelType", "NONE VXLAN GRE NVGRE", start=0)
FlowMatchType = enum.IntEnum("FlowMatchType", "IPV4_UDP FLEX_ITEM ECPRI", start=0)
ReorderMethod = enum.IntEnum("ReorderMethod", "INVALID SEQ_BATCH_NUMBER SEQ_PACKETS_PER_BATCH", start=0)
ReorderDataType = enum.IntEnum("ReorderDataType", "SAME INT4 INT8 INT16 INT32 FP16 BF16 FP32 FP64 INVALID", start=0)
ReorderEndianness = enum.IntEnum("ReorderEndianness", "HOST NETWORK INVALID", start=0)
LogLevel = enum.IntEnum("LogLevel", "TRACE DEBUG INFO WARN ERROR CRITICAL OFF", start=0)

MEM_ACCESS_LOCAL, MEM_ACCESS_RDMA_WRITE, MEM_ACCESS_RDMA_READ = 1, 2, 4
_ACCESS_NAMES = {MEM_ACCESS_LOCAL: "local", MEM_ACCESS_RDMA_WRITE: "rdma_write", MEM_ACCESS_RDMA_READ: "rdma_read"}


def _lower(kind, **renamed):
    """YAML names of an enum's members: their names in lower case, or as `renamed` says."""
    names = {member: member.name.lower() for member in kind if member.name not in ("INVALID", "NONE", "SAME")}
    names.update({kind[name]: text for name, text in renamed.items()})
    return names


_YAML_NAMES = {
    MemoryKind: _lower(MemoryKind),
    StreamType: _lower(StreamType),
    SocketProtocol: _lower(SocketProtocol, INVALID="invalid"),
    EngineType: _lower(EngineType, DEFAULT="default", AFXDP="af_xdp"),
    Direction: _lower(Direction),
    LoopbackType: {LoopbackType.DISABLED: "", LoopbackType.LOOPBACK_TYPE_SW: "sw"},
    LogLevel: _lower(LogLevel),
    SocketMode: _lower(SocketMode),
    RDMAMode: _lower(RDMAMode),
    RDMATransportMode: {m: m.name for m in RDMATransportMode if m.name != "INVALID"},
    QueuePollMode: _lower(QueuePollMode),
    FlowType: _lower(FlowType),
    TunnelType: _lower(TunnelType),
    ReorderDataType: _lower(ReorderDataType),
    ReorderEndianness: _lower(ReorderEndianness),
}


class _Config:
    """Attributes with defaults (`_defaults`), compared and shown by value."""

    _defaults = {}

    def __init__(self, **values):
        for name, default in self._defaults.items():
            setattr(self, name, copy.deepcopy(default))
        for name, value in values.items():
            if name not in self._defaults:
                raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
            setattr(self, name, value)

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._defaults)
        return f"{type(self).__name__}({fields})"


def _config_class(class_name, **defaults):
    return type(class_name, (_Config,), {"_defaults": defaults, "__module__": "daqiri"})


RDMAConfig = _config_class("RDMAConfig", mode=RDMAMode.INVALID, transport_mode=RDMATransportMode.INVALID, port=0)
CommonQueueConfig = _config_class(
    "CommonQueueConfig", name="", id=0, batch_size=0, split_boundary=0, cpu_core="", memory_regions=[], offloads=[]
)
MemoryRegionConfig = _config_class(
    "MemoryRegionConfig", name="", kind=MemoryKind.INVALID, affinity=0, access=0, buf_size=0, adj_size=0,
    ttl_size=0, num_bufs=0, owned=True,
)
RxQueueConfig = _config_class("RxQueueConfig", common=CommonQueueConfig(), timeout_us=0, poll_mode=QueuePollMode.INDIRECT)
# timeout_us is ours: the key DAQIRI's example configs set on TX queues too.
TxQueueConfig = _config_class(
    "TxQueueConfig", common=CommonQueueConfig(), poll_mode=QueuePollMode.INDIRECT, pacing_mbps=0, timeout_us=0
)
VlanActionConfig = _config_class("VlanActionConfig", vlan_id=0, pcp=0, dei=0, ethertype=0x8100)
TunnelConfig = _config_class(
    "TunnelConfig", type=TunnelType.NONE, outer_eth_src="", outer_eth_dst="", outer_ipv4_src="", outer_ipv4_dst="",
    outer_ipv4_ttl=64, outer_ipv4_tos=0, outer_udp_src=0, outer_udp_dst=4789, vni=0, gre_protocol=0x0800, tni=0,
    flow_id=0,
)
FlowAction = _config_class("FlowAction", type=FlowType.QUEUE, id=0, ids=[], vlan=VlanActionConfig(), tunnel=TunnelConfig())
FlexItemMatch = _config_class("FlexItemMatch", flex_item_id=0, val=0, mask=0)
EcpriMatch = _config_class("EcpriMatch", match_msg_type=False, msg_type=0, match_id=False, id=0)
# Addresses as DAQIRI's in_addr_t: integers in network byte order.
FlowMatch = _config_class(
    "FlowMatch", type=FlowMatchType.IPV4_UDP, udp_src=0, udp_dst=0, ipv4_len=0, ipv4_src=0, ipv4_dst=0,
    flex_item_match=FlexItemMatch(), ecpri_match=EcpriMatch(),
)
FlowConfig = _config_class("FlowConfig", name="", id=0, action=FlowAction(), actions=[], match=FlowMatch())
FlowRuleConfig = _config_class("FlowRuleConfig", name="", action=FlowAction(), actions=[], match=FlowMatch())
CommonConfig = _config_class(
    "CommonConfig", version=1, master_core=0, direction=Direction.RX, stream_type=StreamType.INVALID,
    protocol=SocketProtocol.INVALID, engine=EngineType.DEFAULT, engine_type=EngineType.UNKNOWN,
    loopback=LoopbackType.DISABLED,
)
SocketConfig = _config_class(
    "SocketConfig", mode=SocketMode.INVALID, local_addr="", remote_addr="", local_ip="", remote_ip="", local_port=0,
    remote_port=0, max_payload_size=0, max_burst_interval_ms=0, min_ipg_ns=0, retry_connect_s=1,
)
RoCEConfig = _config_class("RoCEConfig", transport_mode=RDMATransportMode.INVALID)
FlexItemConfig = _config_class("FlexItemConfig", name="", id=0, udp_dst_port=0, offset=0)
ReorderBitFieldConfig = _config_class("ReorderBitFieldConfig", bit_offset=0, bit_width=0)
ReorderSeqBatchNumberConfig = _config_class(
    "ReorderSeqBatchNumberConfig", sequence_number=ReorderBitFieldConfig(), batch_number=ReorderBitFieldConfig(),
    packets_per_batch=0,
)
ReorderSeqPacketsPerBatchConfig = _config_class(
    "ReorderSeqPacketsPerBatchConfig", sequence_number=ReorderBitFieldConfig(), packets_per_batch=0
)
ReorderDataTypesConfig = _config_class(
    "ReorderDataTypesConfig", enabled=False, input_type=ReorderDataType.SAME, output_type=ReorderDataType.SAME,
    input_endianness=ReorderEndianness.HOST,
)
ReorderConfig = _config_class(
    "ReorderConfig", name="", reorder_type="", memory_region="", payload_byte_offset=0, flow_ids=[],
    method=ReorderMethod.INVALID, seq_batch_number=ReorderSeqBatchNumberConfig(),
    seq_packets_per_batch=ReorderSeqPacketsPerBatchConfig(), data_types=ReorderDataTypesConfig(),
)
RxConfig = _config_class(
    "RxConfig", flow_isolation=False, hardware_timestamps=False, dynamic_flow_capacity=0, queues=[], flows=[],
    flex_items=[], reorder_configs=[],
)
TxConfig = _config_class("TxConfig", accurate_send=False, queues=[], flows=[])
InterfaceConfig = _config_class(
    "InterfaceConfig", name="", address="", port_id=0, socket=SocketConfig(), roce=RoCEConfig(), rdma=RDMAConfig(),
    rx=RxConfig(), tx=TxConfig(),
)


class NetworkConfig(_config_class(
    "NetworkConfig", common=CommonConfig(), memory_regions={}, interfaces=[], debug=0, tx_meta_buffers=0,
    rx_meta_buffers=0, log_level=LogLevel.WARN,
)):
    """The top-level config; `as_dict()` is the `daqiri.cfg` mapping it writes."""

    def as_dict(self):
        io = _ConfigIo({}, writing=True)
        _bind_network(io, copy.deepcopy(self))
        if io.failure:
            raise ValueError(f"NetworkConfig: {io.failure}")
        return io.tree


class _ConfigIo:
    """Reads a parsed tree into the classes, or writes them into a new tree."""

    def __init__(self, tree, writing):
        self.tree, self.writing, self.read, self.failure = tree, writing, set(), ""

    def _node(self, path):
        node = self.tree
        for key in path.split("."):
            if isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            elif isinstance(node, dict) and key in node:
                node = node[key]
            else:
                return None
        return node

    def has(self, path):
        return self._node(path) is not None

    def count(self, path):
        node = self._node(path)
        return len(node) if isinstance(node, list) else 0

    def fail(self, path, why):
        self.failure = self.failure or f"{path}: {why}"

    def _set(self, path, value):
        keys = path.split(".")
        node = self.tree
        for key, next_key in zip(keys, keys[1:]):
            fresh = [] if next_key.isdigit() else {}
            if isinstance(node, list):
                index = int(key)
                if index == len(node):
                    node.append(fresh)
                node = node[index]
            else:
                node = node.setdefault(key, fresh)
        if isinstance(node, list):
            node.append(value)
        else:
            node[keys[-1]] = value

    def scalar(self, obj, attr, path, convert=lambda v: v, back=lambda v: v):
        """Attribute `attr` of `obj` and the key at `path`, always written."""
        if self.writing:
            self._set(path, back(getattr(obj, attr)))
            return
        value = self._node(path)
        if value is None or isinstance(value, (dict, list)):
            return
        self.read.add(path)
        try:
            setattr(obj, attr, convert(value))
        except (TypeError, ValueError) as error:
            self.fail(path, f"{value!r}: {error}")

    def optional(self, obj, attr, path, **conversions):
        """As `scalar`, left out when the attribute is at its default."""
        if not self.writing or getattr(obj, attr) != type(obj)._defaults[attr]:
            self.scalar(obj, attr, path, **conversions)

    def choice(self, obj, attr, path, optional=False):
        kind = type(type(obj)._defaults[attr])
        names = _YAML_NAMES[kind]
        members = {text: member for member, text in names.items()}
        if self.writing and optional and getattr(obj, attr) == type(obj)._defaults[attr]:
            return
        if self.writing and getattr(obj, attr) not in names:
            self.fail(path, f"{getattr(obj, attr)!r} has no YAML name")
            return

        def convert(text):
            if text not in members:
                raise ValueError(f"not a value of {kind.__name__}")
            return members[text]

        (self.optional if optional else self.scalar)(obj, attr, path, convert=convert, back=lambda m: names[m])

    def items(self, obj, attr, path, bind, make):
        """A list of objects, each bound at its index."""
        items = getattr(obj, attr)
        if not self.writing:
            items[:] = [make() for _ in range(self.count(path))]
        for index, item in enumerate(items):
            bind(self, f"{path}.{index}", item)

    def values(self, obj, attr, path, convert=int):
        """A list of scalars, always written."""
        items = getattr(obj, attr)
        if self.writing:
            for index, value in enumerate(items):
                self._set(f"{path}.{index}", value)
            return
        found = self._node(path)
        if isinstance(found, list):
            for index in range(len(found)):
                self.read.add(f"{path}.{index}")
            setattr(obj, attr, [convert(v) for v in found])

    def unread(self):
        """The first leaf of the parsed tree no attribute read."""
        stack = [("", self.tree)]
        while stack:
            path, node = stack.pop()
            join = (lambda key: f"{path}.{key}") if path else str
            if isinstance(node, dict):
                stack.extend((join(k), v) for k, v in reversed(node.items()) if k != "(derived)")
            elif isinstance(node, list):
                stack.extend((join(i), v) for i, v in reversed(list(enumerate(node))))
            elif node is not None and path not in self.read:
                return path
        return None


def _ipv4(io, match, attr, path):
    """A dotted key held as an integer in network byte order (DAQIRI's in_addr_t)."""
    to_int = lambda text: int.from_bytes(ipaddress.IPv4Address(text).packed, "little")
    to_text = lambda value: str(ipaddress.IPv4Address(value.to_bytes(4, "little")))
    io.optional(match, attr, path, convert=to_int, back=to_text)


def _bind_region(io, at, mr):
    io.scalar(mr, "name", f"{at}.name", convert=str)
    io.choice(mr, "kind", f"{at}.kind")
    for attr in ("affinity", "num_bufs", "buf_size"):
        io.scalar(mr, attr, f"{at}.{attr}", convert=int)
    io.optional(mr, "owned", f"{at}.owned", convert=bool)
    access = type("Access", (), {})()
    access.names = [name for bit, name in _ACCESS_NAMES.items() if mr.access & bit] if io.writing else []
    io.values(access, "names", f"{at}.access", convert=str)
    if not io.writing:
        mr.access = sum(bit for bit, name in _ACCESS_NAMES.items() if name in access.names)


def _bind_queue(io, at, q, tx):
    c = q.common
    io.scalar(c, "name", f"{at}.name", convert=str)
    io.scalar(c, "id", f"{at}.id", convert=int)
    for attr in ("batch_size", "split_boundary"):
        io.optional(c, attr, f"{at}.{attr}", convert=int)
    integer = c.cpu_core.lstrip("-").isdigit()
    io.optional(c, "cpu_core", f"{at}.cpu_core", convert=str, back=int if integer else str)
    io.values(c, "memory_regions", f"{at}.memory_regions", convert=str)
    io.values(c, "offloads", f"{at}.offloads", convert=str)
    io.optional(q, "timeout_us", f"{at}.timeout_us", convert=int)
    io.choice(q, "poll_mode", f"{at}.poll_mode", optional=True)
    if tx:
        io.optional(q, "pacing_mbps", f"{at}.pacing_mbps", convert=int)


def _bind_tunnel(io, at, t):
    io.choice(t, "type", f"{at}.type")
    for attr in ("outer_eth_src", "outer_eth_dst", "outer_ipv4_src", "outer_ipv4_dst"):
        io.optional(t, attr, f"{at}.{attr}", convert=str)
    for attr in ("outer_ipv4_ttl", "outer_ipv4_tos", "outer_udp_src", "outer_udp_dst", "vni", "gre_protocol", "tni",
                 "flow_id"):
        io.optional(t, attr, f"{at}.{attr}", convert=int)


def _bind_action(io, at, a):
    io.choice(a, "type", f"{at}.type")
    if (not a.ids and a.type == FlowType.QUEUE) if io.writing else io.has(f"{at}.id"):
        io.scalar(a, "id", f"{at}.id", convert=int)
    io.values(a, "ids", f"{at}.ids")
    if a.type == FlowType.VLAN_PUSH or not io.writing:
        io.scalar(a.vlan, "vlan_id", f"{at}.vlan_id", convert=int)
        for attr in ("pcp", "dei", "ethertype"):
            io.optional(a.vlan, attr, f"{at}.{attr}", convert=int)
    if a.tunnel.type != TunnelType.NONE if io.writing else io.has(f"{at}.tunnel.type"):
        _bind_tunnel(io, f"{at}.tunnel", a.tunnel)


def _bind_match(io, at, m):
    for attr in ("udp_src", "udp_dst", "ipv4_len"):
        io.optional(m, attr, f"{at}.{attr}", convert=int)
    _ipv4(io, m, "ipv4_src", f"{at}.ipv4_src")
    _ipv4(io, m, "ipv4_dst", f"{at}.ipv4_dst")
    if m.type == FlowMatchType.FLEX_ITEM if io.writing else io.has(f"{at}.flex_item_id"):
        m.type = FlowMatchType.FLEX_ITEM
        for attr in ("flex_item_id", "val", "mask"):
            io.scalar(m.flex_item_match, attr, f"{at}.{attr}", convert=int)
    e = m.ecpri_match
    if m.type == FlowMatchType.ECPRI if io.writing else io.has(f"{at}.ecpri"):
        m.type = FlowMatchType.ECPRI
        if (e.match_msg_type or e.match_id) if io.writing else io.has(f"{at}.ecpri.msg_type"):
            e.match_msg_type = True
            io.scalar(e, "msg_type", f"{at}.ecpri.msg_type", convert=int)
        id_path = f"{at}.ecpri.{'rtc_id' if e.msg_type == 2 else 'pc_id'}"
        if e.match_id if io.writing else io.has(id_path):
            e.match_id = True
            io.scalar(e, "id", id_path, convert=int)


def _bind_flow(io, at, f):
    io.scalar(f, "name", f"{at}.name", convert=str)
    if not f.actions if io.writing else io.has(f"{at}.action"):
        _bind_action(io, f"{at}.action", f.action)
    io.items(f, "actions", f"{at}.actions", _bind_action, FlowAction)
    _bind_match(io, f"{at}.match", f.match)
    if isinstance(f, FlowConfig):
        io.scalar(f, "id", f"{at}.id", convert=int)


def _bind_bits(io, at, b):
    io.scalar(b, "bit_offset", f"{at}.bit_offset", convert=int)
    io.scalar(b, "bit_width", f"{at}.bit_width", convert=int)


def _bind_reorder(io, at, r):
    for attr in ("name", "reorder_type", "memory_region"):
        io.scalar(r, attr, f"{at}.{attr}", convert=str)
    io.scalar(r, "payload_byte_offset", f"{at}.payload_byte_offset", convert=int)
    io.values(r, "flow_ids", f"{at}.flow_ids")
    by_batch, by_count = f"{at}.method.seq_batch_number", f"{at}.method.seq_packets_per_batch"
    if r.method == ReorderMethod.SEQ_BATCH_NUMBER if io.writing else io.has(by_batch):
        r.method = ReorderMethod.SEQ_BATCH_NUMBER
        m = r.seq_batch_number
        _bind_bits(io, f"{by_batch}.sequence_number", m.sequence_number)
        _bind_bits(io, f"{by_batch}.batch_number", m.batch_number)
        shift = m.sequence_number.bit_width - min(m.sequence_number.bit_width, m.batch_number.bit_width)
        m.packets_per_batch = 1 << shift if shift < 32 else 0
    if r.method == ReorderMethod.SEQ_PACKETS_PER_BATCH if io.writing else io.has(by_count):
        r.method = ReorderMethod.SEQ_PACKETS_PER_BATCH
        _bind_bits(io, f"{by_count}.sequence_number", r.seq_packets_per_batch.sequence_number)
        io.scalar(r.seq_packets_per_batch, "packets_per_batch", f"{by_count}.packets_per_batch", convert=int)
    d = r.data_types
    if d.enabled if io.writing else io.has(f"{at}.data_types.input_type"):
        d.enabled = True
        io.choice(d, "input_type", f"{at}.data_types.input_type")
        io.choice(d, "output_type", f"{at}.data_types.output_type")
        io.choice(d, "input_endianness", f"{at}.data_types.endianness")


def _bind_interface(io, at, i):
    io.scalar(i, "name", f"{at}.name", convert=str)
    io.optional(i, "address", f"{at}.address", convert=str)
    s, socket = i.socket, f"{at}.socket_config"
    if s.mode != SocketMode.INVALID if io.writing else io.has(f"{socket}.mode"):
        io.choice(s, "mode", f"{socket}.mode")
        for attr in ("local_addr", "remote_addr", "local_ip", "remote_ip"):
            io.optional(s, attr, f"{socket}.{attr}", convert=str)
        for attr in ("local_port", "remote_port", "max_payload_size", "max_burst_interval_ms", "min_ipg_ns",
                     "retry_connect_s"):
            io.optional(s, attr, f"{socket}.{attr}", convert=int)
    io.choice(i.roce, "transport_mode", f"{at}.roce_config.transport_mode", optional=True)
    io.choice(i.rdma, "mode", f"{at}.rdma_config.mode", optional=True)
    io.choice(i.rdma, "transport_mode", f"{at}.rdma_config.xmode", optional=True)
    io.optional(i.rdma, "port", f"{at}.rdma_config.port", convert=int)
    rx = f"{at}.rx"
    if i.rx.queues if io.writing else io.has(f"{rx}.queues"):
        for attr in ("flow_isolation", "hardware_timestamps"):
            io.optional(i.rx, attr, f"{rx}.{attr}", convert=bool)
        io.optional(i.rx, "dynamic_flow_capacity", f"{rx}.dynamic_flow_capacity", convert=int)
        io.items(i.rx, "queues", f"{rx}.queues", lambda io, at, q: _bind_queue(io, at, q, False), RxQueueConfig)
        io.items(i.rx, "flows", f"{rx}.flows", _bind_flow, FlowConfig)
        io.items(i.rx, "flex_items", f"{rx}.flex_items", _bind_flex_item, FlexItemConfig)
        io.items(i.rx, "reorder_configs", f"{rx}.reorder_configs", _bind_reorder, ReorderConfig)
    tx = f"{at}.tx"
    if i.tx.queues if io.writing else io.has(f"{tx}.queues"):
        io.optional(i.tx, "accurate_send", f"{tx}.accurate_send", convert=bool)
        io.items(i.tx, "queues", f"{tx}.queues", lambda io, at, q: _bind_queue(io, at, q, True), TxQueueConfig)
        io.items(i.tx, "flows", f"{tx}.flows", _bind_flow, FlowConfig)


def _bind_flex_item(io, at, f):
    io.scalar(f, "name", f"{at}.name", convert=str)
    for attr in ("id", "offset", "udp_dst_port"):
        io.scalar(f, attr, f"{at}.{attr}", convert=int)


def _bind_network(io, config):
    c = config.common
    io.scalar(c, "version", "version", convert=int)
    io.scalar(c, "master_core", "master_core", convert=int)
    io.choice(c, "stream_type", "stream_type")
    io.choice(c, "engine", "engine", optional=True)
    io.choice(c, "loopback", "loopback", optional=True)
    io.choice(config, "log_level", "log_level", optional=True)
    io.optional(config, "debug", "debug", convert=int, back=bool)
    for attr in ("tx_meta_buffers", "rx_meta_buffers"):
        io.optional(config, attr, attr, convert=int)
    if not io.writing:
        io.choice(c, "engine_type", "(derived).engine_type")
        io.choice(c, "protocol", "(derived).protocol")
        io.choice(c, "direction", "(derived).dir")
    # DAQIRI keeps regions by name; the YAML lists them (written in name order).
    regions = type("Regions", (), {})()
    regions.list = [config.memory_regions[name] for name in sorted(config.memory_regions)] if io.writing else []
    io.items(regions, "list", "memory_regions", _bind_region, MemoryRegionConfig)
    if not io.writing:
        config.memory_regions = {mr.name: mr for mr in regions.list}
    io.items(config, "interfaces", "interfaces", _bind_interface, InterfaceConfig)
    if not io.writing:
        for index, interface in enumerate(config.interfaces):
            interface.port_id = index


FlowOpType = enum.IntEnum("FlowOpType", "ADD_RX ADD_RX_BATCH DELETE", start=0)
FlowOpResult = _config_class("FlowOpResult", op_id=0, type=FlowOpType.ADD_RX, status=None, flow_id=0, flow_ids=[])


def flow_yaml(flow):
    """A FlowRuleConfig as the YAML of its rx.flows entry (dynamic flows cross libdaqiri's ABI so)."""
    if not isinstance(flow, FlowRuleConfig):
        raise TypeError(f"a flow is a daqiri.FlowRuleConfig, not {type(flow).__name__}")
    io = _ConfigIo({}, writing=True)
    _bind_flow(io, "flow", copy.deepcopy(flow))
    if io.failure:
        raise ValueError(f"FlowRuleConfig: {io.failure}")
    return yaml.safe_dump(io.tree["flow"])


def _converters(kind, name):
    names = _YAML_NAMES[kind]
    members = {text: member for member, text in names.items()}

    def from_string(text):
        if text not in members:
            raise ValueError(f"{text!r} is not a {kind.__name__}: {', '.join(sorted(t for t in members if t))}")
        return members[text]

    def to_string(value):
        return names.get(value, "invalid")

    from_string.__name__, to_string.__name__ = f"{name}_from_string", f"{name}_to_string"
    return from_string, to_string


engine_type_from_string, engine_type_to_string = _converters(EngineType, "engine_type")
stream_type_from_string, stream_type_to_string = _converters(StreamType, "stream_type")
reorder_data_type_from_string, reorder_data_type_to_string = _converters(ReorderDataType, "reorder_data_type")
reorder_endianness_from_string, reorder_endianness_to_string = _converters(ReorderEndianness, "reorder_endianness")
log_level_from_string, log_level_to_string = _converters(LogLevel, "log_level")
FUNCTIONS = [
    engine_type_from_string, engine_type_to_string, stream_type_from_string, stream_type_to_string,
    reorder_data_type_from_string, reorder_data_type_to_string, reorder_endianness_from_string,
    reorder_endianness_to_string, log_level_from_string, log_level_to_string,
]


def network_config_of(tree):
    """A NetworkConfig of a tree libdaqiri parsed: (config, None), or (None, why) for a key no attribute holds."""
    io = _ConfigIo(tree, writing=False)
    config = NetworkConfig()
    _bind_network(io, config)
    if io.failure:
        return None, io.failure
    unread = io.unread()
    if unread:
        return None, f"{unread}: NetworkConfig has no attribute for this key; init from the YAML to use it"
    return config, None


CLASSES = [
    EngineType, MemoryKind, StreamType, SocketProtocol, Direction, LoopbackType, RDMAMode, RDMATransportMode,
    SocketMode, QueuePollMode, FlowType, TunnelType, FlowMatchType, ReorderMethod, ReorderDataType,
    ReorderEndianness, LogLevel, RDMAConfig, CommonQueueConfig, MemoryRegionConfig, RxQueueConfig, TxQueueConfig,
    VlanActionConfig, TunnelConfig, FlowAction, FlexItemMatch, EcpriMatch, FlowMatch, FlowConfig, FlowRuleConfig,
    CommonConfig, SocketConfig, RoCEConfig, FlexItemConfig, ReorderBitFieldConfig, ReorderSeqBatchNumberConfig,
    ReorderSeqPacketsPerBatchConfig, ReorderDataTypesConfig, ReorderConfig, RxConfig, TxConfig, InterfaceConfig,
    NetworkConfig, FlowOpType, FlowOpResult,
]
