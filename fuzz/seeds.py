#!/usr/bin/env python3
"""Writes each fuzz target's starting corpus under OUT/<target>/.

config: the upstream DAQIRI configs our tests read and our own configs.
steering: Ethernet frames, plain and odd. pcap_append: pcap files, whole,
torn and foreign, each behind its option byte. admin_api: HTTP requests for
every route, as the README and tests send them.
"""

import shutil
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WRITE = "Bearer fuzz-write-token"
READ = "Bearer fuzz-read-token"


def ipv4_udp(sport, dport, payload=b"x" * 32, vlan=None, total=None, flags=0x4000, proto=17):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    length = total if total is not None else 20 + len(udp)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length, 1, flags, 64, proto, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    if vlan is not None:
        eth += struct.pack("!HH", 0x8100, vlan)
    return eth + struct.pack("!H", 0x0800) + ip + udp


def frames():
    return {
        "dst_5000": ipv4_udp(4096, 5000),
        "rss": ipv4_udp(1500, 6050),
        "len_128": ipv4_udp(7, 7, payload=b"y" * 100),
        "vlan": ipv4_udp(1500, 6000, vlan=100),
        "fragment": ipv4_udp(1, 5000, flags=0x2000),
        "tcp": ipv4_udp(1, 5000, proto=6),
        "short_total": ipv4_udp(1, 5000, total=20),
        "ipv6": b"\x02" * 12 + b"\x86\xdd" + b"\x60" + b"\x00" * 39 + b"\x00" * 8,
        "arp": b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 28,
    }


def pcap(magic=0xA1B2C3D4, snaplen=262144, link=1, endian="<", records=(b"a" * 60, b"b" * 20)):
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link)
    for data in records:
        out += struct.pack(endian + "IIII", 1_700_000_000, 5, len(data), len(data)) + data
    return out


def pcaps():
    whole = pcap()
    return {
        "empty": b"",
        "header_only": pcap(records=()),
        "whole": whole,
        "torn_record": whole[:-7],
        "torn_header": whole[:-30],
        "nanos": pcap(magic=0xA1B23C4D),
        "small_snaplen": pcap(snaplen=16),
        "big_endian": pcap(endian=">"),
        "raw_ip_link": pcap(link=101),
        "pcapng": b"\x0a\x0d\x0d\x0a" + b"\x00" * 24,
    }


CONFIG = (REPO / "gateway/server/src/fuzzing/admin.rs").read_text().split('pub const CONFIG: &str = "\\\n')[1].split('";')[0]


def request(method, path, token=None, body=b"", content_type="application/json"):
    head = f"{method} {path} HTTP/1.1\r\nhost: gateway\r\n"
    if token:
        head += f"authorization: {token}\r\n"
    if body:
        head += f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def requests():
    flow = b'{"name": "g", "id": 9, "action": {"type": "queue", "id": 0}, "match": {"udp_dst": 6000}}'
    capture = b'{"name": "c", "format": "pcap", "interface": "lo", "queue": 1, "max_packets": 10, "duration_s": 2.5}'
    more_flows = CONFIG.replace("udp_dst: 5000", "udp_dst: 5001")
    return {
        "status": request("GET", "/api/v1/status", READ),
        "stats": request("GET", "/api/v1/stats", READ),
        "config": request("GET", "/api/v1/config", WRITE),
        "put_same": request("PUT", "/api/v1/config", WRITE, CONFIG.encode(), "application/yaml"),
        "put_flows": request("PUT", "/api/v1/config", WRITE, more_flows.encode(), "application/yaml"),
        "put_bad": request("PUT", "/api/v1/config", WRITE, b"daqiri: {cfg: {version: 2}}", "application/yaml"),
        "reload": request("POST", "/api/v1/config/reload", WRITE),
        "flows": request("GET", "/api/v1/interfaces/lo/flows", READ),
        "add_flow": request("POST", "/api/v1/interfaces/lo/flows", WRITE, flow),
        "delete_flow": request("DELETE", "/api/v1/interfaces/lo/flows/1", WRITE),
        "capture": request("POST", "/api/v1/captures", WRITE, capture),
        "captures": request("GET", "/api/v1/captures", READ),
        "capture_1": request("GET", "/api/v1/captures/1", READ),
        "stop_1": request("DELETE", "/api/v1/captures/1", WRITE),
        "download_1": request("GET", "/api/v1/captures/1/download", READ),
        "metrics": request("GET", "/metrics"),
        "health": request("GET", "/healthz"),
        "ready": request("GET", "/readyz"),
        "openapi": request("GET", "/api/v1/openapi.json"),
        "no_token": request("PUT", "/api/v1/config", None, b"x: 1", "application/yaml"),
        "read_token_writes": request("POST", "/api/v1/captures", READ, capture),
    }


def visit(messages, bursts=4, scribbles=()):
    """A consumer_socket input: counts, length-prefixed messages, (offset, value) pairs."""
    data = bytes([len(messages), bursts])
    for message in messages:
        data += struct.pack("<H", len(message)) + message
    return data + b"".join(struct.pack("<II", offset, value) for offset, value in scribbles)


def visits():
    hello = b'{"version":1,"target":{"interface":"lo","queue":0},"slots":4,"token":"fuzz-consumer-token"}'
    flow = b'{"version":1,"target":{"interface":"lo","flow":1},"slots":2,"token":"fuzz-consumer-token"}'
    return {
        "hello": visit([hello]),
        "hello_releases": visit([hello], 8, [(192, 1), (320 + 16, 0), (192, 2), (320 + 20, 1)]),
        "counter_ahead": visit([hello], 4, [(192, 999)]),
        "hello_then_more": visit([hello, b"more"]),
        "no_token": visit([hello.replace(b',"token":"fuzz-consumer-token"', b"")]),
        "unknown_flow": visit([flow]),
        "garbage": visit([b"\x00\xff{"]),
        "silent": visit([], 2),
    }


def write(out, target, files):
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def main():
    out = Path(sys.argv[1])
    configs = out / "config"
    configs.mkdir(parents=True, exist_ok=True)
    for source in [*(REPO / "configs").glob("*.yaml"), *(REPO / "gateway/config/tests/data/upstream").glob("*.yaml")]:
        shutil.copy(source, configs / source.name)
    write(out, "steering", frames())
    write(out, "pcap_append", {f"{name}_{option}": bytes([option]) + data
                               for name, data in pcaps().items() for option in range(4)})
    write(out, "admin_api", requests())
    write(out, "consumer_socket", visits())


if __name__ == "__main__":
    main()
