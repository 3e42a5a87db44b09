"""The live index on the kernel tree, through MCP (the official Python SDK), side by side
with the same server without the index and with a cold rg per search.

1. Build: time from the server's start until a grep says engine "index"; peak RSS
   (VmHWM) of the server by then; RSS once warm.
2. Warm tools/call latency (p50, p99) of selective searches on the indexed server, the
   same searches on a `--no-index` server, and cold `rg` processes on the same tree.
3. Parity: every search's structured answer (minus the engine field) is the same from
   both servers; FAILS the run otherwise.
4. Freshness: a file written by this (another) process is found by a search issued
   50 ms later, and a deleted one is gone.
5. Persistence: the index file's size against the bytes it indexes (`ferret index status`),
   then a restarted server on the same state directory: time from its start until a grep
   says engine "index", and its anonymous RSS once warm.
6. Kernel parity at scale: 200 more questions built from identifiers sampled from the tree
   (plain, ignore-case, regex, fixed strings with a glob, under a path), index vs scan.
Prints a JSON object for report.py.
"""

import glob as globmod, json, os, re, statistics, subprocess, sys, tempfile, time
import anyio
from mcp import Client, StdioServerParameters

FERRET, K, OFFICIAL = sys.argv[1], sys.argv[2], sys.argv[3]
RUNS = int(os.environ.get("INDEX_RUNS", "30"))
SCAN_RUNS = int(os.environ.get("SCAN_RUNS", "5"))
OFFICIAL_RUNS = int(os.environ.get("OFFICIAL_RUNS", "3"))

# name, grep arguments, the rg arguments that ask the same question
QUERIES = [
    ("rare literal", {"pattern": "ieee80211_tx_status_ext"}, ["-l", "ieee80211_tx_status_ext"]),
    ("regex with a rare literal", {"pattern": r"EXPORT_SYMBOL_GPL\(kvm_\w+_msr"},
     ["-l", r"EXPORT_SYMBOL_GPL\(kvm_\w+_msr"]),
    ("rare literal, ignore case, content", {"pattern": "KMALLOC_ARRAY_NODE", "ignore_case": True,
                                            "output_mode": "content"},
     ["-n", "-i", "KMALLOC_ARRAY_NODE"]),
    ("no usable trigram: \\w+ (count)", {"pattern": r"\w+", "output_mode": "count", "max_results": 10},
     ["-c", r"\w+"]),
    ("no usable trigram: ^ (files)", {"pattern": "^", "max_results": 10}, ["-l", "^"]),
]
# More questions for parity only.
PARITY = [
    {"pattern": "spin_lock_irqsave", "output_mode": "count", "max_results": 0},
    {"pattern": "MODULE_LICENSE\\(\"GPL v2\"\\)", "max_results": 0},
    {"pattern": "struct\\s+file_operations\\s+\\w+_fops", "output_mode": "count", "max_results": 0},
    {"pattern": "TODO|FIXME|XXX", "ignore_case": True, "output_mode": "count", "max_results": 0},
    {"pattern": "a.b", "fixed_strings": True, "max_results": 0},
    {"pattern": "ieee80211", "glob": "*.h", "max_results": 0},
    {"pattern": "kzalloc", "glob": ["!*.c"], "max_results": 0},
    {"pattern": "Copyright", "path": "drivers/net", "output_mode": "count", "max_results": 0},
    {"pattern": "\\bfoo\\b", "include_hidden": True, "max_results": 0},
    {"pattern": "x{3,}y", "max_results": 0},
    {"pattern": "gitignore|mailmap|clang-format", "max_results": 0},
]


STATE = tempfile.mkdtemp(prefix="ferret-bench-state-")


def server(*extra):
    # A state directory of the run's own: the first server builds from nothing, the
    # restarted one finds what it saved.
    return Client(StdioServerParameters(
        command=FERRET,
        args=["--root", K, "--state-dir", STATE, "--set", "max_requests_per_round=0",
              "--set", "max_bytes_per_round=0", "--set", "request_timeout=0s", "serve", *extra]))


def sampled_questions(n):
    """n grep questions from identifiers of the tree (every k-th distinct one of a fixed
    set of headers, so the same run to run), five kinds in turn."""
    words, seen = [], set()
    for f in sorted(globmod.glob(os.path.join(K, "include", "linux", "*.h")))[:120]:
        for w in re.findall(rb"[A-Za-z_][A-Za-z0-9_]{5,}", open(f, "rb").read()):
            if w not in seen:
                seen.add(w)
                words.append(w.decode())
    step = max(1, len(words) // n)
    out = []
    for i, w in enumerate(words[::step][:n]):
        out.append([
            {"pattern": w, "max_results": 0},
            {"pattern": w, "ignore_case": True, "output_mode": "count", "max_results": 0},
            {"pattern": w + r"\s*[(;=]", "output_mode": "content", "max_results": 40},
            {"pattern": w, "fixed_strings": True, "glob": "*.c", "max_results": 0},
            {"pattern": w, "path": "include", "output_mode": "count", "max_results": 0},
        ][i % 5])
    return out


async def wait_indexed(c):
    # Polled every 50 ms in one small directory (usr/, 12 files): until the index is
    # ready a search scans, and a whole-tree poll would scan the tree twenty times a
    # second, taking the cores the build runs on (the build row measured the poller).
    while True:
        r = await c.call_tool("grep", {"pattern": "zzzz_not_there", "path": "usr"})
        if r.structured_content.get("engine") == "index":
            return
        await anyio.sleep(0.05)


def server_pid(no_index):
    """The pid of the ferret server the SDK started (by its command line)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].decode(errors="replace") == FERRET and b"serve" in cmd \
                and (b"--no-index" in cmd) == no_index:
            return int(pid)
    raise SystemExit("server process not found")


def rss_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def strip(r):
    s = dict(r.structured_content or {"error": r.content[0].text})
    s.pop("engine", None)
    return s


async def timed(c, args, n, tool="grep"):
    """p50/p99 of n calls, and what the last one answered."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = await c.call_tool(tool, args)
        times.append((time.perf_counter() - t) * 1000)
        assert not r.is_error, r.content
    times.sort()
    s = r.structured_content
    out = {"p50_ms": statistics.median(times), "p99_ms": times[max(0, int(len(times) * 0.99) - 1)],
           "engine": s.get("engine")}
    if tool == "glob":
        out.update(count=s["count"], shown=len(s["files"]))
    else:
        out.update(files=s["file_count"])
    return out


def rg(args):
    times = []
    for _ in range(SCAN_RUNS):
        t = time.perf_counter()
        subprocess.run(["rg", *args, K], stdout=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def warm_corpus():
    """Reads the whole tree just before the build (rg, every file, no match): this VM's
    DAMON pages out file pages idle for a minute, so what earlier runs read is not
    resident any more; a build timed on a cold cache measures the disk. Returns how long
    the read took, and how long a second one took (near 0.5 s when the tree is in
    memory)."""
    times = []
    for _ in range(2):
        t = time.perf_counter()
        subprocess.run(["rg", "-uuu", "-c", "qq_no_such_string_qq", K], capture_output=True)
        times.append(time.perf_counter() - t)
    return times


async def main():
    out = {"queries": [], "parity": {"compared": 0, "differ": []}}
    out["warm_s"] = warm_corpus()
    started = time.perf_counter()
    async with server() as ix, server("--no-index") as scan:
        pid = server_pid(False)
        await wait_indexed(ix)
        out["build_s"] = time.perf_counter() - started
        out["build_peak_rss_mb"] = rss_kb(pid, "VmHWM") / 1024
        for name, args, rg_args in QUERIES:
            await timed(ix, args, 3)  # warm-up
            row = {"name": name, "args": args, "index": await timed(ix, args, RUNS),
                   "scan": await timed(scan, args, SCAN_RUNS), "rg_ms": rg(rg_args)}
            out["queries"].append(row)
        for args in [{"pattern": "**/*.c"}, {"pattern": "*.rs", "max_results": 0},
                     {"pattern": "Makefile", "path": "drivers", "max_results": 0},
                     {"pattern": "**/*", "include_hidden": True, "max_results": 0}]:
            a = strip(await ix.call_tool("glob", args))
            b = strip(await scan.call_tool("glob", args))
            out["parity"]["compared"] += 1
            if a != b:
                out["parity"]["differ"].append(["glob", args])
        for args in [q[1] for q in QUERIES] + PARITY + sampled_questions(200):
            a = strip(await ix.call_tool("grep", args))
            b = strip(await scan.call_tool("grep", args))
            out["parity"]["compared"] += 1
            if a != b:
                out["parity"]["differ"].append(args)
        # Freshness: written by this process, searched 50 ms later.
        # Where an agent writes: a new file in an existing directory.
        d = os.path.join(K, "drivers", "net", "ethernet", "intel", "e1000")
        p = os.path.join(d, "ferret_bench_fresh.c")
        with open(p, "w") as f:
            f.write("int fresh_word_qx7 = 1;\n")
        await anyio.sleep(0.05)
        t = time.perf_counter()
        found = (await ix.call_tool("grep", {"pattern": "fresh_word_qx7"})).structured_content
        refresh_ms = (time.perf_counter() - t) * 1000
        with open(p, "a") as f:
            f.write("int fresh_word_qx8 = 2;\n")
        await anyio.sleep(0.05)
        appended = (await ix.call_tool("grep", {"pattern": "fresh_word_qx8"})).structured_content
        os.unlink(p)
        await anyio.sleep(0.05)
        gone = (await ix.call_tool("grep", {"pattern": "fresh_word_qx7"})).structured_content
        out["fresh"] = {"created_found": found["file_count"] == 1, "appended_found": appended["file_count"] == 1,
                        "deleted_gone": gone["file_count"] == 0, "first_search_after_create_ms": refresh_ms}
        # glob from the list: **/*.c, first 100 and the true count
        g = await timed(ix, {"pattern": "**/*.c"}, RUNS, "glob")
        gs = await timed(scan, {"pattern": "**/*.c"}, SCAN_RUNS, "glob")
        out["glob"] = {"index": g, "scan": gs}
        out["warm_rss_mb"] = rss_kb(pid, "VmRSS") / 1024
        out["warm_anon_mb"] = rss_kb(pid, "RssAnon") / 1024
        # The server writes its index once built; wait for it before stopping.
        while not globmod.glob(os.path.join(STATE, "*", "index", "trigrams.v1")):
            await anyio.sleep(0.1)
    st = json.loads(subprocess.run([FERRET, "--root", K, "--state-dir", STATE, "index", "status", "--json"],
                                   capture_output=True, check=True).stdout)
    out["disk"] = {"index_bytes": st["disk_bytes"], "content_bytes": st["indexed_bytes"], "files": st["files"]}
    # A restart: the same server on the same state directory.
    started = time.perf_counter()
    async with server() as ix:
        await wait_indexed(ix)
        restart_s = time.perf_counter() - started
        pid = server_pid(False)
        # The same kinds of work as the first server did before its RSS was read.
        rows = {name: await timed(ix, args, RUNS if i < 3 else 3) for i, (name, args, _) in enumerate(QUERIES)}
        for args in PARITY:
            await ix.call_tool("grep", args)
        g = await timed(ix, {"pattern": "**/*.c"}, RUNS, "glob")
        out["restart"] = {"answer_s": restart_s, "warm_anon_mb": rss_kb(pid, "RssAnon") / 1024,
                          "warm_rss_mb": rss_kb(pid, "VmRSS") / 1024, "rows": rows, "glob": g}
    # The official filesystem server's search_files on the same glob, in the same run.
    async with Client(StdioServerParameters(command="node", args=[OFFICIAL, K])) as off:
        await off.call_tool("search_files", {"path": K, "pattern": "**/*.c"})
        times = []
        for _ in range(OFFICIAL_RUNS):
            t = time.perf_counter()
            r = await off.call_tool("search_files", {"path": K, "pattern": "**/*.c"})
            times.append((time.perf_counter() - t) * 1000)
        out["glob"]["official"] = {"p50_ms": statistics.median(times), "count": len(r.content[0].text.splitlines())}

    print(json.dumps(out))


anyio.run(main)
