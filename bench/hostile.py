#!/usr/bin/env python3
"""Hostile requests against `ferret serve` (stdio MCP): peak memory and a normal call's latency.

Part 1, request shapes: eight ~4 MB requests of different shapes, sent at once on one
session, then a normal grep; prints each answer's error code (or "ok"), the server's peak
RSS (/proc/PID/status VmHWM) and the normal request's latency.

Part 2, hostile ignore files: a grep on a tree holding one 400 000-line .gitignore
(11.7 MB), and on a tree of DIRS directories each with a 1 MB .gitignore (hard links to
one file: no disk cost); prints the time to answer, the answer and peak RSS.

    bench/hostile.py FERRET_BIN [CORPUS_DIR]

CORPUS_DIR defaults to this repository's src/ copied into a temp dir. Plain JSON-RPC,
no SDK needed. Env: PARTS (default 1,2), DIRS (default 10000), TIMEOUT (the server's request_timeout, 5s).
"""

import json, os, shutil, subprocess, sys, tempfile, threading, time

FERRET = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
DIRS = int(os.environ.get("DIRS", "10000"))
PARTS = os.environ.get("PARTS", "1,2").split(",")
TIMEOUT = os.environ.get("TIMEOUT", "5s")
# Figures for bench/report.py (written as JSON to $FIGURES when set).
FIG = {"bursts": [], "ignore": []}


class Server:
    def __init__(self, root, *extra):
        self.p = subprocess.Popen(
            [FERRET, "--root", root, "--set", f"request_timeout={TIMEOUT}",
             "--set", "max_bytes_per_round=0", "--set", "max_requests_per_round=0",
             *extra, "serve", "--no-index"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.answers, self.cv = {}, threading.Condition()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.peak = 0
        self.sampling = True
        threading.Thread(target=self._sample, daemon=True).start()
        self.rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "hostile", "version": "1"}})
        self.wait(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self):
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if "id" in m:
                with self.cv:
                    self.answers[m["id"]] = (m, time.perf_counter())
                    self.cv.notify_all()

    def _sample(self):
        while self.sampling and self.p.poll() is None:
            self.peak = max(self.peak, vm_hwm(self.p.pid))
            time.sleep(0.02)

    def send(self, msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            self.p.stdin.write(data)
            self.p.stdin.flush()

    def rpc(self, id, method, params):
        self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})

    def call(self, id, tool, args):
        self.rpc(id, "tools/call", {"name": tool, "arguments": args})

    def wait(self, id, limit=300):
        with self.cv:
            self.cv.wait_for(lambda: id in self.answers, timeout=limit)
            return self.answers.get(id, (None, time.perf_counter()))

    def close(self):
        self.peak = max(self.peak, vm_hwm(self.p.pid))
        self.sampling = False
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
        return self.peak


def vm_hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def outcome(m):
    if m is None:
        return "no answer"
    if "error" in m:
        return "rpc error " + str(m["error"].get("code"))
    r = m["result"]
    text = "".join(c.get("text", "") for c in r.get("content", []))
    if r.get("isError"):
        for code in ["INVALID_ARGUMENT", "INVALID_REGEX", "INVALID_GLOB", "TIMEOUT", "RESULT_TOO_LARGE"]:
            if code in text:
                return code
        return "error: " + text[:80]
    return "ok"


def shapes():
    big = "x" * (4 << 20)
    braces = "*.{" + ",".join(f"e{i}" for i in range(300_000)) + "}"
    alternation = "|".join(f"w{i}" for i in range(450_000))
    globs = [f"!d{i}/**" for i in range(400_000)]
    return [
        ("glob braces 300k", "glob", {"pattern": braces}),
        ("grep literal 3 MB", "grep", {"pattern": "y" * (3 << 20), "fixed_strings": True}),
        ("grep alternation 450k", "grep", {"pattern": alternation}),
        ("grep (a{1000}){1000}", "grep", {"pattern": "(a{1000}){1000}" + " " * (4 << 20)}),
        ("grep 400k globs", "grep", {"pattern": "fn", "glob": globs}),
        ("grep glob braces", "grep", {"pattern": "fn", "glob": braces}),
        ("file_search 4 MB", "file_search", {"query": big}),
        ("search_files 4 MB", "search_files", {"pattern": big}),
    ]


def at_the_caps():
    """Shapes just under the caps: admitted, so they show what an admitted request costs."""
    return [
        ("grep literal 64 KiB", "grep", {"pattern": "y" * 65_000, "fixed_strings": True}),
        ("grep 4000 alternatives", "grep", {"pattern": "|".join(f"w{i}x" for i in range(4000))}),
        ("grep (a{1000}){1000}", "grep", {"pattern": "(a{1000}){1000}"}),
        ("grep (?:\\w{50}){4}", "grep", {"pattern": "(?:\\w{50}){4}"}),
        ("glob 700 braces", "glob", {"pattern": "*.{" + ",".join(f"e{i}" for i in range(700)) + "}"}),
        ("grep 256 globs", "grep", {"pattern": "fn", "glob": [f"!d{i}{'x' * 200}/**" for i in range(256)]}),
        ("grep multiline", "grep", {"pattern": "fn.*\\n.*let", "multiline": True, "max_results": 0}),
        ("file_search 64 KiB", "file_search", {"query": "z" * 65_000}),
    ]


def part1(root):
    for title, work in [("eight concurrent ~4 MB hostile requests", shapes()),
                        ("eight concurrent requests just under the caps", at_the_caps())]:
        burst(root, title, work)


def burst(root, title, work):
    print(f"== part 1: {title}, then a normal grep ==")
    s = Server(root, "--set", "tools=glob,grep,file_search,search_files")
    base = vm_hwm(s.p.pid)
    t = time.perf_counter()
    s.call(999, "grep", {"pattern": "fn main"})
    _, done = s.wait(999)
    idle_ms = (done - t) * 1000
    sent = time.perf_counter()
    for i, (_, tool, args) in enumerate(work):
        s.call(i + 1, tool, args)
    t = time.perf_counter()
    s.call(1000, "grep", {"pattern": "fn main"})
    normal, done = s.wait(1000)
    normal_ms = (done - t) * 1000
    for i, (name, _, _) in enumerate(work):
        m, at = s.wait(i + 1)
        print(f"  {name:28s} {outcome(m):18s} answered after {(at - sent) * 1000:8.0f} ms")
    peak = s.close()
    print(f"  normal grep alone: {idle_ms:.0f} ms; during the hostile requests: {normal_ms:.0f} ms ({outcome(normal)})")
    print(f"  peak RSS (VmHWM): {peak} MiB (idle server: {base} MiB)")
    FIG["bursts"].append({
        "title": title, "peak_mib": peak, "idle_mib": base,
        "normal_ms_alone": round(idle_ms, 1), "normal_ms_during": round(normal_ms, 1),
        "normal_outcome": outcome(normal),
        "answers": {name: outcome(s.answers.get(i + 1, (None, 0))[0])
                    for i, (name, _, _) in enumerate(work)},
    })
    return peak


def timed_grep(root, label):
    s = Server(root)
    t = time.perf_counter()
    s.call(1, "grep", {"pattern": "NEEDLE"})
    m, done = s.wait(1)
    peak = s.close()
    text = ""
    if m and "result" in m:
        text = "".join(c.get("text", "") for c in m["result"].get("content", []))
    warned = "warning" in text
    print(f"  {label:44s} {(done - t):6.2f} s  {outcome(m):8s} warning shown: {warned}  peak RSS {peak} MiB")
    FIG["ignore"].append({"label": label, "seconds": round(done - t, 2), "outcome": outcome(m),
                          "warned": warned, "peak_mib": peak})


def part2():
    print("== part 2: hostile ignore files (grep NEEDLE) ==")
    with tempfile.TemporaryDirectory() as d:
        one = os.path.join(d, "one")
        os.makedirs(one)
        with open(os.path.join(one, ".gitignore"), "w") as f:
            for i in range(400_000):
                f.write(f"*pattern{i}*/**/x{i}?.log\n")
        with open(os.path.join(one, "a.txt"), "w") as f:
            f.write("NEEDLE\n")
        size = os.path.getsize(os.path.join(one, ".gitignore"))
        timed_grep(one, f"one .gitignore, 400k lines ({size / 1e6:.1f} MB)")

        many = os.path.join(d, "many")
        os.makedirs(many)
        src = os.path.join(d, "gitignore-1mb")
        with open(src, "w") as f:
            i = 0
            while f.tell() < (1 << 20) - 64:
                f.write(f"*m{i}*/**/y{i}?.tmp\n")
                i += 1
        for n in range(DIRS):
            sub = os.path.join(many, f"d{n:05d}")
            os.makedirs(sub)
            os.link(src, os.path.join(sub, ".gitignore"))
        with open(os.path.join(many, "a.txt"), "w") as f:
            f.write("NEEDLE\n")
        timed_grep(many, f"{DIRS} dirs, each a 1 MB .gitignore")


def main():
    corpus = sys.argv[2] if len(sys.argv) > 2 else None
    with tempfile.TemporaryDirectory() as d:
        root = corpus or os.path.join(d, "src")
        if not corpus:
            shutil.copytree(os.path.join(HERE, "..", "src"), root)
        if "1" in PARTS:
            part1(root)
    if "2" in PARTS:
        part2()
    if os.environ.get("FIGURES"):
        with open(os.environ["FIGURES"], "w") as f:
            json.dump(FIG, f, indent=1)


if __name__ == "__main__":
    main()
