"""MCP rows of BENCHMARKS.md, with one client (the official Python SDK) for every server.

1. tools/call latency of file_exists over one stdio session (p50, p99 over N calls).
2. glob **/*.c on the kernel tree: ferret's glob vs the official server-filesystem's
   search_files (which returns every match, so ferret is asked for every match too).
3. Cancelling a grep on the kernel tree: time until the client has control back, and
   until the next call on the same session is answered; the audit log must say CANCELLED.
Prints a JSON object for report.py.
"""

import json, os, statistics, sys, tempfile, time
import anyio
from mcp import Client, StdioServerParameters

FERRET, K, OFFICIAL = sys.argv[1], sys.argv[2], sys.argv[3]
CALLS = int(os.environ.get("MCP_CALLS", "1000"))
GLOB_RUNS = int(os.environ.get("GLOB_RUNS", "3"))


def ferret(*extra):
    # Without the live index: these rows measure the scan (bench/index.sh measures the index).
    return Client(StdioServerParameters(command=FERRET, args=["--root", K, *extra, "serve", "--no-index"]))


async def latency():
    async with ferret("--set", "max_requests_per_round=0") as c:
        for _ in range(50):
            await c.call_tool("file_exists", {"path": "Makefile"})
        times = []
        for _ in range(CALLS):
            t = time.perf_counter()
            r = await c.call_tool("file_exists", {"path": "Makefile"})
            times.append((time.perf_counter() - t) * 1000)
            assert r.structured_content["exists"]
    times.sort()
    return {"p50_ms": statistics.median(times), "p99_ms": times[int(len(times) * 0.99) - 1], "calls": CALLS}


async def timed_glob(client, tool, args, count):
    await client.call_tool(tool, args)  # warm-up
    runs = []
    for _ in range(GLOB_RUNS):
        t = time.perf_counter()
        r = await client.call_tool(tool, args)
        runs.append(time.perf_counter() - t)
        assert not r.is_error, r.content
        n = count(r)
    return statistics.median(runs), n


async def globs():
    async with ferret("--set", "request_timeout=0s", "--set", "max_bytes_per_round=0") as c:
        fer, nf = await timed_glob(c, "glob", {"pattern": "**/*.c", "max_results": 0},
                                   lambda r: r.structured_content["count"])
        fer_default, _ = await timed_glob(c, "glob", {"pattern": "**/*.c"},
                                          lambda r: r.structured_content["count"])
    official = Client(StdioServerParameters(command="node", args=[OFFICIAL, K]))
    async with official as c:
        off, no = await timed_glob(c, "search_files", {"path": K, "pattern": "**/*.c"},
                                   lambda r: len(r.content[0].text.splitlines()))
    return {"ferret_s": fer, "ferret_default_s": fer_default, "official_s": off, "ferret_files": nf, "official_files": no, "runs": GLOB_RUNS}


async def cancel():
    audit = tempfile.mktemp(suffix=".jsonl")
    out = {}
    async with ferret("--audit-log", audit, "--set", "request_timeout=0s") as c:
        await c.call_tool("file_exists", {"path": "Makefile"})
        t = time.perf_counter()
        with anyio.move_on_after(0.3):
            await c.call_tool("grep", {"pattern": r"\w{5,}\s+\w{5,}\s+\w{5,}\s+\d{7}", "output_mode": "count"})
        waited = time.perf_counter() - t
        t = time.perf_counter()
        r = await c.call_tool("file_exists", {"path": "Makefile"})
        out["next_call_ms"] = (time.perf_counter() - t) * 1000
        out["control_back_ms"] = (waited - 0.3) * 1000
        assert r.structured_content["exists"]
    entries = [json.loads(l) for l in open(audit)]
    grep = [e for e in entries if e["operation"] == "grep"][0]
    out["grep_result"] = grep.get("code", grep["result"])
    out["grep_ran_ms"] = grep["duration_ms"]
    os.unlink(audit)
    return out


async def main():
    res = {"latency": await latency(), "glob": await globs(), "cancel": await cancel()}
    print(json.dumps(res))


anyio.run(main)
