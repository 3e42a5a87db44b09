#!/usr/bin/env python3
"""Slow clients against `ferret serve --http`: is a normal request still answered?

Starts the release server on 127.0.0.1 (loopback only, a free port), opens N slow
connections (default 3,000) of three kinds in turn: nothing sent, half a request header,
a whole header then a body that never comes. While an attacker thread keeps opening more
(replacing the ones the server closed, up to N open from the client's side, for at most
--seconds), it times normal requests (an MCP initialize, a fresh connection each, one per
quarter second) and prints the figures. (`slow_held_by_client_min` counts the sockets the
attacker had open when a request was sent, closed-by-server ones replaced as found.) Everything stops by itself: the attacker after --seconds, the server
with SIGTERM. Standard library only.

    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo build --release
    python3 bench/slowclients.py [--bin target/release/ferret] [--slow 3000] [--seconds 30]
"""

import argparse
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"  # loopback only, never anything else
TOKEN = "bench-token"
INIT = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "0"}},
}).encode()


def start(binary, root, extra):
    proc = subprocess.Popen([binary, "--root", root, "serve", "--http", f"{HOST}:0", "--token", TOKEN, *extra],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp", proc.stderr.readline())
        if m:
            threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    sys.exit("the server did not start")


def slow_connection(port, kind):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect((HOST, port))
    if kind == 1:
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    elif kind == 2:
        s.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                   "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{").encode())
    return s


def normal_request(port):
    """Seconds until a whole 200 answer to an initialize on a fresh connection, or None."""
    started = time.monotonic()
    try:
        s = socket.create_connection((HOST, port), timeout=10)
        s.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                   "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                   f"Content-Length: {len(INIT)}\r\nConnection: close\r\n\r\n").encode() + INIT)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        if data.startswith(b"HTTP/1.1 200") and b'"serverInfo"' in data:
            return time.monotonic() - started
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "ferret"))
    ap.add_argument("--slow", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("serve_args", nargs="*", help="extra `serve` arguments, e.g. -- --max-connections 4096")
    a = ap.parse_args()
    a.slow = min(a.slow, 20_000)  # bounded whatever is asked
    a.seconds = min(a.seconds, 120)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.slow + 256)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    root = tempfile.mkdtemp(prefix="ferret-slow-")
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write("hello\n")
    proc, port = start(os.path.abspath(a.bin), root, a.serve_args)
    baseline = [normal_request(port) for _ in range(5)]
    held, stop, opened = [], threading.Event(), [0]
    deadline = time.monotonic() + a.seconds

    def attack():
        kind = 0
        while not stop.is_set() and time.monotonic() < deadline:
            if len(held) >= a.slow:
                # Replace the connections the server closed, then look again.
                alive = []
                for s in held:
                    try:
                        s.setblocking(False)
                        if s.recv(1) == b"":
                            s.close()
                            continue
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        continue
                    alive.append(s)
                held[:] = alive
                if len(held) >= a.slow:
                    time.sleep(0.05)
                continue
            try:
                held.append(slow_connection(port, kind))
                opened[0] += 1
            except OSError:
                time.sleep(0.01)
            kind = (kind + 1) % 3

    t = threading.Thread(target=attack, daemon=True)
    t.start()
    while len(held) < a.slow and time.monotonic() < deadline:
        time.sleep(0.05)
    ramp = a.seconds - (deadline - time.monotonic())
    # Spread the normal requests over a few seconds of sustained attack: the attacker
    # keeps replacing what the server closes meanwhile.
    times, alive = [], []
    for _ in range(a.requests):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
        alive.append(len(held))
        times.append(normal_request(port))
    stop.set()
    t.join(timeout=10)
    for s in held:
        s.close()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    ok = [x for x in times if x is not None]
    base = [x for x in baseline if x is not None]
    print(json.dumps({
        "slow_connections_target": a.slow,
        "slow_connections_opened": opened[0],
        "seconds_to_open_target": round(ramp, 2),
        "serve_args": a.serve_args,
        "baseline_ms_median": round(statistics.median(base) * 1000, 1) if base else None,
        "slow_held_by_client_min": min(alive) if alive else None,
        "normal_requests": len(times),
        "normal_answered": len(ok),
        "normal_ms_median": round(statistics.median(ok) * 1000, 1) if ok else None,
        "normal_ms_max": round(max(ok) * 1000, 1) if ok else None,
    }, indent=1))
    return 0 if ok and len(ok) == len(times) and max(ok) < 5 else 1


if __name__ == "__main__":
    sys.exit(main())
