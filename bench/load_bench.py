"""HTTP load test: SESSIONS concurrent MCP sessions (half on the 2026-07-28 protocol, half
on the legacy 2025-11-25 handshake) mixing grep, read_file, edit, write_file and undo
against one `ferret serve --http` on loopback for SECONDS seconds, with the official MCP
Python SDK. Bounded in count and time; stops by itself.

Each session edits and creates only its own files, so every outcome is known:
- a protocol error is any exception from the SDK (a dropped session, a JSON-RPC error);
- a lost edit is a file whose content at the end is not what its session's successful
  calls say it must be;
- an inconsistent undo is an undo whose file is not, read back at once, the content
  before the change it undid.
The server's RSS is sampled every second. Prints a JSON object for report.py.
"""

import json, os, random, re, signal, statistics, subprocess, sys, tempfile, time
import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

FERRET = sys.argv[1]
SESSIONS = int(os.environ.get("SESSIONS", "100"))
SECONDS = float(os.environ.get("SECONDS", "60"))
TOKEN = "load-test-token"
# How often each call is made: grep, read, edit, write, undo.
WEIGHTS = [float(w) for w in os.environ.get("WEIGHTS", "3,3,2,1,1").split(",")]


def workspace():
    root = tempfile.mkdtemp(prefix="ferret-load-")
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "return", "static", "struct", "lock", "queue", "TODO"]
    for d in range(10):
        os.makedirs(f"{root}/src/d{d}")
        for f in range(30):
            lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(60)]
            with open(f"{root}/src/d{d}/f{f:02}.c", "w") as fh:
                fh.write("\n".join(lines) + "\n")
    os.makedirs(f"{root}/sess")
    for i in range(SESSIONS):
        with open(f"{root}/sess/s{i:03}.txt", "w") as fh:
            fh.write("counter 0\n")
    return root


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(len(xs) * p)) - 1))] if xs else 0.0


async def session(i, url, deadline, stats):
    mode = os.environ.get("LOAD_MODE") or ("legacy" if i % 2 else "auto")
    rng = random.Random(i)
    mine = f"sess/s{i:03}.txt"
    content = "counter 0\n"  # what `mine` must hold
    counter = 0
    history = []  # (change_id, path, content before, existed before)
    created = {}  # path -> content it must hold (None: removed by an undo)
    hc = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    try:
        async with Client(streamable_http_client(url, http_client=hc), mode=mode) as c:
            while time.monotonic() < deadline:
                op = rng.choices(["grep", "read", "edit", "write", "undo"], WEIGHTS)[0]
                if op == "undo" and not history:
                    op = "edit"
                t0 = time.perf_counter()
                if op == "grep":
                    r = await c.call_tool("grep", {"pattern": rng.choice(["TODO", "lock.*queue", "return"]),
                                                   "path": "src"})
                elif op == "read":
                    r = await c.call_tool("read_file", {"path": f"src/d{rng.randrange(10)}/f{rng.randrange(30):02}.c"})
                elif op == "edit":
                    new = f"counter {counter + 1}\n"
                    r = await c.call_tool("edit", {"path": mine, "old_string": content, "new_string": new})
                    if not r.is_error:
                        history.append((r.structured_content["change_id"], mine, content, True))
                        counter += 1
                        content = new
                elif op == "write":
                    path = f"sess/s{i:03}-{len(created)}.txt"
                    body = f"made by {i} at {counter}\n"
                    r = await c.call_tool("write_file", {"path": path, "content": body})
                    if not r.is_error:
                        history.append((r.structured_content.get("change_id"), path, None, False))
                        created[path] = body
                else:
                    cid, path, before, existed = history.pop()
                    r = await c.call_tool("undo", {"id": cid})
                    # The undo's own time; the read back below is a second call.
                    undo_ms = (time.perf_counter() - t0) * 1000
                    if r.is_error:
                        history.append((cid, path, before, existed))
                    else:
                        if path == mine:
                            content = before
                        else:
                            created[path] = None
                        # Read back at once: the content before the change, or gone.
                        back = await c.call_tool("read_file", {"path": path})
                        ok = (not back.is_error and back.structured_content["content"] == before) if existed \
                            else (back.is_error and "NOT_FOUND" in back.content[0].text)
                        if not ok:
                            stats["bad_undos"] += 1
                ms = undo_ms if op == "undo" else (time.perf_counter() - t0) * 1000
                stats["lat"].setdefault(op, []).append(ms)
                if r.is_error:
                    stats["tool_errors"].append(f"{op}: {r.content[0].text[:160]}")
            # The end state of every file this session touched.
            r = await c.call_tool("read_file", {"path": mine})
            if r.is_error or r.structured_content["content"] != content:
                stats["lost"].append(mine)
            for path, body in created.items():
                r = await c.call_tool("read_file", {"path": path})
                if body is None:
                    if not r.is_error:
                        stats["lost"].append(f"{path} (undone, still there)")
                elif r.is_error or r.structured_content["content"] != body:
                    stats["lost"].append(path)
    except Exception as e:  # noqa: BLE001 - every failure of the SDK is a protocol error
        stats["protocol_errors"].append(f"session {i} ({mode}): {type(e).__name__}: {str(e)[:200]}")


async def main():
    root = workspace()
    state = tempfile.mkdtemp(prefix="ferret-load-state-")
    proc = subprocess.Popen(
        [FERRET, "--root", root, "--allow-write", "--state-dir", state,
         "--set", "max_requests_per_round=0", "--set", "max_bytes_per_round=0",
         "serve", "--http", "127.0.0.1:0", "--token", TOKEN, "--no-index",
         # Every session comes from loopback, one client to the session table: its share
         # (an eighth of the table by default) must hold them all.
         "--max-sessions-per-client", str(max(SESSIONS, 1))],
        stderr=subprocess.PIPE, text=True)
    url = None
    while url is None:
        line = proc.stderr.readline()
        if not line:
            sys.exit("server did not start")
        m = re.search(r"serving MCP at (http://\S+)", line)
        url = m and m.group(1)
    stats = {"lat": {}, "tool_errors": [], "protocol_errors": [], "lost": [], "bad_undos": 0}
    rss = []
    start = time.monotonic()
    deadline = start + SECONDS

    async def sample():
        while time.monotonic() < deadline + 5:
            rss.append((round(time.monotonic() - start, 1), rss_kib(proc.pid)))
            await anyio.sleep(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for i in range(SESSIONS):
            tg.start_soon(session, i, url, deadline, stats)
    # Every session closed: the server hands freed memory back within its 5 s check.
    # What it still holds then is what it keeps, not what the allocator kept.
    await anyio.sleep(11)
    rss_after_close = rss_kib(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    lat = stats["lat"]
    every = [x for xs in lat.values() for x in xs]
    during = [kib for t, kib in rss if 10 <= t <= SECONDS]
    print(json.dumps({
        "sessions": SESSIONS, "seconds": SECONDS,
        "calls": len(every),
        "per_op": {op: {"calls": len(xs), "p50_ms": statistics.median(xs), "p99_ms": pct(xs, 0.99)}
                   for op, xs in sorted(lat.items())},
        "all": {"p50_ms": statistics.median(every), "p99_ms": pct(every, 0.99)},
        "protocol_errors": stats["protocol_errors"][:20], "protocol_error_count": len(stats["protocol_errors"]),
        "tool_errors": stats["tool_errors"][:20], "tool_error_count": len(stats["tool_errors"]),
        "lost": stats["lost"][:20], "lost_count": len(stats["lost"]),
        "bad_undos": stats["bad_undos"],
        "rss_kib_at_10s": during[0] if during else 0,
        "rss_kib_at_end": during[-1] if during else 0,
        "rss_kib_max": max((k for _, k in rss), default=0),
        "rss_kib_after_close": rss_after_close,
        "rss_kib_every_5s": [k for t, k in rss][::5],
    }, indent=1))


anyio.run(main)
