#!/usr/bin/env python3
"""Issue 26's two kernel figures, measured in one run on the benchmark corpus:

1. `ferret call grep` with a huge `max_results` prints at most what the MCP tool would
   return for the same arguments (the same output budget), and `--full` lifts it;
2. a grep limited to 300 ms returns the matches found so far, marked `incomplete`.

    bench/everyday.py FERRET_BIN CORPUS

Prints a table row per measurement and verdict lines computed from the figures."""
import json
import subprocess
import sys
import time

FERRET, K = sys.argv[1], sys.argv[2]
ARGS = {"pattern": "static", "max_results": 100000000, "output_mode": "content"}


def mcp_answer(args):
    """The tools/call result `ferret serve` sends for grep `args` (raw stdio JSON-RPC)."""
    cmd = [FERRET, "--root", K, "serve", "--no-index"]
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "everyday", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "grep", "arguments": args}},
    ]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        for m in msgs:
            p.stdin.write(json.dumps(m) + "\n")
            p.stdin.flush()
            if "id" in m:
                while True:
                    reply = json.loads(p.stdout.readline())
                    if reply.get("id") == m["id"]:
                        break
        return reply["result"]
    finally:
        p.kill()
        p.wait()


def call(*extra, args=ARGS, glob_flags=()):
    t = time.monotonic()
    out = subprocess.run([FERRET, "--root", K, *glob_flags, "call", "grep",
                          json.dumps(args), *extra], capture_output=True, text=True)
    return out.stdout, time.monotonic() - t, out.returncode


# Warm the page cache so both sides read the same files the same way.
call()
r = mcp_answer(ARGS)
text = len(r["content"][0]["text"])
structured = len(json.dumps(r.get("structuredContent", {}), separators=(",", ":")))
mcp = max(text, structured)
cli, _, _ = call()
full, _, _ = call("--full")
print("| What | Characters |")
print("|---|---|")
print(f"| MCP `tools/call grep` text | {text} |")
print(f"| MCP `tools/call grep` structured (compact JSON) | {structured} |")
compact = len(json.dumps(json.loads(cli), separators=(",", ":")))
print(f"| `ferret call grep` as printed (indented JSON) | {len(cli)} |")
print(f"| `ferret call grep`, the same JSON compact | {compact} |")
print(f"| `ferret call grep --full` | {len(full)} |")

slow = {"pattern": "[a-z]+_[a-z]+_[a-z]+_[a-z]+\\(", "output_mode": "files_with_matches"}
out, took, rc = call(args=slow, glob_flags=("--set", "request_timeout=300ms"))
d = json.loads(out) if rc == 0 else {}
inc = d.get("incomplete")
print()
print("| 300 ms grep | exit | took | files shown | file_count | files searched | reason |")
print("|---|---|---|---|---|---|---|")
print(f"| `{slow['pattern']}` | {rc} | {took:.2f} s | {len(d.get('files', []))} | "
      f"{d.get('file_count')} | {inc and inc.get('files_searched')} | {inc and inc.get('reason')} |")
print()
print(f"- verdict: `ferret call grep` printed {compact} characters of JSON (compact; "
      + f"{len(cli)} indented), "
      + ("the same as" if compact == structured else
         "at most" if compact <= mcp else "MORE than")
      + f" the MCP answer's structured content ({structured}; its text {text}); "
      + f"`--full` printed {len(full)} ({len(full) / max(len(cli), 1):.0f}x)")
print("- verdict: the 300 ms grep "
      + (f"returned {d.get('file_count')} files marked incomplete ({inc.get('reason')})"
         if rc == 0 and inc else "did NOT return partial results marked incomplete")
      + f", in {took:.2f} s")
