#!/usr/bin/env python3
"""Probes a running gateway's /healthz, /readyz and /metrics (a fresh
connection each, timed to the server's close) every 50 ms while another
thread PUTs a large and a small config in turn, so the engine restarts back
and forth; prints the five slowest probes and each PUT's duration.

    tests/restart_probes.py ADMIN_PORT LARGE.yaml SMALL.yaml SECONDS

Issue 29's open point: compare with gateway/server/tests/probes_under_attack.rs."""

import socket
import sys
import threading
import time
import urllib.request


def main() -> None:
    admin, seconds = int(sys.argv[1]), float(sys.argv[4])
    configs = [open(path).read() for path in sys.argv[2:4]]
    stop = threading.Event()
    puts = []

    def restart() -> None:
        while not stop.is_set():
            for text in configs:
                started = time.monotonic()
                request = urllib.request.Request(
                    f"http://127.0.0.1:{admin}/api/v1/config",
                    data=text.encode(),
                    method="PUT",
                    headers={"Content-Type": "application/yaml"},
                )
                with urllib.request.urlopen(request, timeout=120) as answer:
                    answer.read()
                puts.append(time.monotonic() - started)

    threading.Thread(target=restart, daemon=True).start()
    time.sleep(0.3)
    probes = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        path = ["/healthz", "/readyz", "/metrics"][len(probes) % 3]
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", admin)) as probe:
            connected = time.monotonic()
            probe.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            probe.recv(1)
            first = time.monotonic()
            while probe.recv(4096):
                pass
        done = time.monotonic()
        probes.append((done - started, connected - started, first - connected, path))
        time.sleep(0.05)
    stop.set()
    for total, connect, first, path in sorted(probes, reverse=True)[:5]:
        print(f"{path}: {total * 1e3:.1f} ms (connect {connect * 1e3:.1f}, first byte {first * 1e3:.1f})")
    print("PUTs (s):", [round(d, 2) for d in puts])


if __name__ == "__main__":
    main()
