#!/usr/bin/env python3
"""Memory over a hostile tree of long paths (issue #25, round 13): 120 000 files under 14
levels of 250-byte names (paths of ~3.8 KB). For each build: `ferret index` peak RSS, and
a stdio server's peak RSS under 16 concurrent `glob **/*y` (max_results 0), 8 concurrent
files-with-matches greps (max_results 0) and 8 concurrent content greps, with a small call
timed after each burst. Writes the "paths" section of BENCHMARKS.md; verdicts are computed
from the figures. Usage: paths_bench.py TREE_DIR NOW_BIN [BASE_BIN] (stdlib only)."""
import json, os, re, subprocess, sys, tempfile, threading, time

TARGET_MIB = 1024


def make_tree(root):
    if os.path.exists(os.path.join(root, ".done")):
        return
    p = root
    for i in range(13):
        p = os.path.join(p, chr(ord("a") + i) * 250)
    for leaf in ("x", "y"):
        d = os.path.join(p, leaf * 250)
        os.makedirs(d, exist_ok=True)
        for j in range(60000):
            n = f"{j:06d}" + "n" * 200 + ("y" if j % 2 else "z")
            with open(os.path.join(d, n), "w") as f:
                f.write("hello %d\n" % j)
    open(os.path.join(root, ".done"), "w").close()


def hwm(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024
    return 0


def burst(binary, root, env, n, tool, args):
    p = subprocess.Popen([binary, "--root", root, "serve", "--no-index"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for i in range(n):
        send({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": tool, "arguments": args}})
    got, errors = 0, 0
    while got < n:
        line = p.stdout.readline()
        if not line:
            break
        m = json.loads(line)
        if m.get("id"):
            got += 1
            errors += bool(m.get("result", {}).get("isError") or m.get("error"))
    t = time.time()
    send({"jsonrpc": "2.0", "id": 999, "method": "tools/call", "params": {"name": "file_exists", "arguments": {"path": "."}}})
    small = p.stdout.readline()
    small_ms = (time.time() - t) * 1000
    peak = hwm(p.pid)
    p.kill()
    p.wait()
    return {"peak_mib": peak, "answered": got, "errors": errors, "small_ms": round(small_ms, 1),
            "small_ok": b'"isError":false' in small}


def measure(binary, root):
    env = dict(os.environ)
    state = tempfile.mkdtemp(prefix="ferret-paths-state-")
    env.update(XDG_STATE_HOME=state, XDG_DATA_HOME=state, XDG_CONFIG_HOME=state)
    r = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--root", root, "--state-dir", state, "index"],
                       env=env, capture_output=True, text=True)
    index_mib = int(r.stderr.strip().splitlines()[-1]) // 1024
    out = {"index_peak_mib": index_mib}
    out["glob16"] = burst(binary, root, env, 16, "glob", {"pattern": "**/*y", "max_results": 0})
    out["grep8"] = burst(binary, root, env, 8, "grep", {"pattern": "hello", "max_results": 0})
    out["content8"] = burst(binary, root, env, 8, "grep", {"pattern": "hello", "max_results": 0, "output_mode": "content"})
    return out


def main():
    tree, now = sys.argv[1], sys.argv[2]
    base = sys.argv[3] if len(sys.argv) > 3 else None
    make_tree(tree)
    figs = {"now": measure(now, tree)}
    if base:
        figs["base"] = measure(base, tree)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cores = os.cpu_count()
    mem = int(open("/proc/meminfo").read().split()[1]) // (1 << 20)
    rows = [("`ferret index` (MiB)", "index_peak_mib", None),
            ("16 concurrent `glob **/*y`, max_results 0: server peak (MiB)", "glob16", "peak_mib"),
            ("8 concurrent greps, files, max_results 0: server peak (MiB)", "grep8", "peak_mib"),
            ("8 concurrent greps, content, max_results 0: server peak (MiB)", "content8", "peak_mib")]

    def cell(which, key, sub):
        f = figs.get(which)
        if f is None:
            return "—"
        v = f[key] if sub is None else f[key][sub]
        if sub:
            b = f[key]
            return f"{v} ({b['answered']} answered, {b['errors']} errors; small call {'ok' if b['small_ok'] else 'FAILED'} in {b['small_ms']} ms)"
        return str(v)

    lines = ["## Paths: memory over a tree of long paths", "",
             f"Machine: {cores} cores, {mem} GiB RAM; ferret {rev}. Base: " + (os.environ.get("BASE_REV", base) if base else "none") + ".", "",
             "Command: `bench/paths.sh [BASE_BIN]` (bench/paths_bench.py: 120 000 files under 14 levels of 250-byte names, ~3.8 KB paths; peak RSS is VmHWM; a server runs `--no-index` for the bursts, and a small `file_exists` is timed after each).", "",
             "| row | base | now | target |", "| --- | ---: | ---: | --- |"]
    verdicts = []
    for label, key, sub in rows:
        lines.append(f"| {label} | {cell('base', key, sub)} | {cell('now', key, sub)} | < {TARGET_MIB} |")
        f = figs["now"]
        v = f[key] if sub is None else f[key][sub]
        ok = v < TARGET_MIB and (sub is None or f[key]["small_ok"])
        verdicts.append((label, ok))
    lines.append("")
    for label, ok in verdicts:
        lines.append(f"- {'met' if ok else 'MISSED'}: {label} under {TARGET_MIB} MiB" + ("" if ok else " (or the small call failed)"))
    met = sum(ok for _, ok in verdicts)
    lines += ["", f"Verdict (from the rows above): {met} of {len(verdicts)} targets met.", "<!-- /paths -->", ""]
    section = "\n".join(lines)
    md = open("BENCHMARKS.md").read()
    m = re.search(r"## Paths: memory over a tree of long paths.*?<!-- /paths -->\n\n?", md, re.S)
    md = md[:m.start()] + section + md[m.end():] if m else md.rstrip("\n") + "\n\n" + section
    open("BENCHMARKS.md", "w").write(md)
    print(section)
    json.dump(figs, open("bench/results/paths.json", "w"), indent=1)


if __name__ == "__main__":
    main()
