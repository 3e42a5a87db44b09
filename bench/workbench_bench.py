"""Workbench rows of BENCHMARKS.md, with one client (the official MCP Python SDK).

1. edit latency (p50, p99) over one stdio session, on a scratch copy of 20 kernel files
   (never the corpus itself), beside the official server-filesystem's edit_file doing the
   same edits on its own scratch copy;
2. apply_patch of one 20-file patch (one hunk per file), p50/p99;
3. a content-mode grep for a common word (`return`) on the kernel tree with every match
   asked for: the size of what comes back against max_output_chars, and what it says it
   left out.
Prints a JSON object for report.py.
"""

import json, os, shutil, statistics, sys, tempfile, time
import anyio
from mcp import Client, StdioServerParameters

FERRET, K, OFFICIAL = sys.argv[1], sys.argv[2], sys.argv[3]
EDITS = int(os.environ.get("EDIT_CALLS", "200"))
PATCHES = int(os.environ.get("PATCH_CALLS", "100"))
SOURCES = [
    "kernel/fork.c", "kernel/exit.c", "kernel/signal.c", "kernel/sys.c", "kernel/pid.c",
    "kernel/cred.c", "kernel/panic.c", "kernel/cpu.c", "kernel/kthread.c", "kernel/workqueue.c",
    "mm/mmap.c", "mm/memory.c", "mm/slab_common.c", "mm/util.c", "mm/filemap.c",
    "fs/open.c", "fs/read_write.c", "fs/namei.c", "fs/exec.c", "fs/file.c",
]


def scratch():
    d = tempfile.mkdtemp(prefix="ferret-workbench-")
    for i, src in enumerate(SOURCES):
        text = open(os.path.join(K, src), encoding="utf-8", errors="replace").read()
        with open(os.path.join(d, f"f{i:02}.c"), "w") as f:
            f.write(f"/* MARK {0:06} */\n" + text)
    return d


def pct(times):
    times = sorted(times)
    return {"p50_ms": statistics.median(times), "p99_ms": times[max(0, int(len(times) * 0.99) - 1)], "calls": len(times)}


async def timed(call, n):
    for i in range(5):
        await call(i)  # warm-up
    times = []
    for i in range(5, 5 + n):
        t = time.perf_counter()
        await call(i)
        times.append((time.perf_counter() - t) * 1000)
    return pct(times)


async def ferret_rows():
    d, state = scratch(), tempfile.mkdtemp(prefix="ferret-state-")
    args = ["--root", d, "--state-dir", state, "--allow-write", "--set", "max_requests_per_round=0",
            "--set", "max_bytes_per_round=0", "serve"]
    async with Client(StdioServerParameters(command=FERRET, args=args)) as c:
        async def edit(i):
            r = await c.call_tool("edit", {"path": "f00.c", "old_string": f"/* MARK {i:06} */",
                                           "new_string": f"/* MARK {i + 1:06} */"})
            assert not r.is_error, r.content
        edit_row = await timed(edit, EDITS)

        async def patch(i):
            hunks = "".join(f"*** Update File: f{j:02}.c\n@@\n-/* MARK {i if j else i + 5 + EDITS:06} */\n"
                            f"+/* MARK {(i if j else i + 5 + EDITS) + 1:06} */\n" for j in range(20))
            r = await c.call_tool("apply_patch", {"patch": f"*** Begin Patch\n{hunks}*** End Patch\n"})
            assert not r.is_error, r.content
        patch_row = await timed(patch, PATCHES)
    shutil.rmtree(d)
    shutil.rmtree(state)
    return edit_row, patch_row


async def official_edit():
    d = scratch()
    async with Client(StdioServerParameters(command="node", args=[OFFICIAL, d])) as c:
        async def edit(i):
            r = await c.call_tool("edit_file", {"path": os.path.join(d, "f00.c"), "edits": [
                {"oldText": f"/* MARK {i:06} */", "newText": f"/* MARK {i + 1:06} */"}]})
            assert not r.is_error, r.content
        row = await timed(edit, EDITS)
    shutil.rmtree(d)
    return row


async def budget():
    args = ["--root", K, "--set", "request_timeout=0s", "--set", "max_bytes_per_round=0", "serve"]
    async with Client(StdioServerParameters(command=FERRET, args=args)) as c:
        t = time.perf_counter()
        r = await c.call_tool("grep", {"pattern": "return", "output_mode": "content", "max_results": 0})
        took = time.perf_counter() - t
    text = "".join(x.text for x in r.content if getattr(x, "type", "") == "text")
    s = r.structured_content
    return {"text_chars": len(text), "structured_chars": len(json.dumps(s, separators=(",", ":"))),
            "match_count": s["match_count"], "file_count": s["file_count"],
            "left_lines": s["left_out"]["matching_lines"], "left_files": s["left_out"]["files"],
            "budget": 80000, "seconds": took}


async def main():
    edit_row, patch_row = await ferret_rows()
    print(json.dumps({"edit": edit_row, "official_edit": await official_edit(), "patch": patch_row,
                      "budget": await budget()}))


anyio.run(main)
