"""Turns bench/results/*.tsv + hyperfine JSON into a section of BENCHMARKS.md."""
import json, os, platform, subprocess, sys

OUT = "bench/results"


def sh(cmd):
    try:
        return subprocess.check_output(cmd, shell=True, text=True, stderr=subprocess.DEVNULL).strip()
    except subprocess.CalledProcessError:
        return "?"


def machine(peers=True):
    cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    mem = sh("free -g | awk '/Mem:/ {print $2}'")
    if not peers:
        return f"{sh('nproc')} cores ({cpu}), {mem} GiB RAM, Linux {platform.release()}"
    return (f"{sh('nproc')} cores ({cpu}), {mem} GiB RAM, Linux {platform.release()}; "
            f"{sh('rg --version | head -1')}, {sh('fd --version')}, {sh('hyperfine --version')}, "
            f"ferret {sh('git rev-parse --short HEAD')}")


def search_section(corpus):
    files = sh(f"find {corpus} -type f | wc -l")
    size = sh(f"du -sh {corpus} | cut -f1")
    lines = ["## Search: ferret vs ripgrep and fd", "",
             f"Corpus: Linux 6.1 source (Debian linux-source-6.1), {size}, {files} files, warm cache.",
             f"Machine: {machine()}.", "",
             "Command: `bench/search.sh` (RUNS=20 by default). Every grep pattern was first checked to give "
             "the same files and counts as `rg --count`, and glob the same file list as fd. Times are "
             "hyperfine medians of both commands measured side by side in one run; ratio = ferret / peer.", "",
             "| row | peer | peer median (ms) | ferret median (ms) | ratio | target |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    worst = 0.0
    for line in open(f"{OUT}/rows.tsv"):
        label, path = line.rstrip("\n").split("\t")
        res = json.load(open(path))["results"]
        peer, fer = res[0]["median"] * 1000, res[1]["median"] * 1000
        ratio = fer / peer
        is_glob = label.startswith("glob")
        # The cold all-paths glob has the live-index issue's tighter target (#13).
        target = 1.05 if label == "glob *.c (all paths)" else 1.10
        worst = max(worst, ratio)
        lines.append(f"| {label} | {'fd' if is_glob else 'rg'} | {peer:.0f} | {fer:.0f} | {ratio:.2f} | "
                     f"{f'≤ {target:.2f} ' + ('met' if ratio <= target else 'MISSED')} |")
    lines += ["", f"Worst ratio: {worst:.2f} (target ≤ 1.10, goal 1.05).", "",
              "Peak RSS (KiB, max of 3 runs, `/usr/bin/time -v`):", "",
              "| row | rg | ferret | ratio | target |", "| --- | ---: | ---: | ---: | --- |"]
    for line in open(f"{OUT}/rss.tsv"):
        label, a, b = line.rstrip("\n").split("\t")
        a, b = int(a), int(b)
        tgt = "≤ 1.5× rg" + ("; < 200 MB" if "every" in label else "")
        ok = b <= 1.5 * a and (b < 200 * 1024 if "every" in label else True)
        lines.append(f"| {label} | {a} | {b} | {b / a:.2f} | {tgt}: {'met' if ok else 'MISSED'} |")
    lines += ["", "Notes:",
              "- rg flags that match ferret's handling: `--no-require-git` (ferret honours .gitignore outside "
              "a git repository), `--ignore-file` with ferret's deny list. Both skip hidden and binary files "
              "and never follow symlinks.",
              "- Content rows: rg writes every matching line (to /dev/null); ferret keeps the first 200 lines "
              "in path order and counts the rest, which is what bounds its memory whatever the match count.",
              "- glob rows: `fd -t f -e c` vs `ferret call glob '{\"pattern\":\"*.c\"}'`, once returning every "
              "path (max_results 0) and once the default first 100 (still walking the whole tree for the "
              "count).",
              "- Both walk with the same ignore rules. ferret's walker opens each directory with "
              "`openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)` from the root's handle and reads its names "
              "through that handle, so no name needs confirming afterwards; it also sorts the paths (fd "
              "prints them as found) and returns them as one JSON document."]
    missed = [l for l in lines if l.endswith("MISSED |")]
    lines.append(f"- Verdict (from the rows above): {len(missed)} of the speed and memory rows missed "
                 "their target" + (": " + "; ".join(l.split(" | ")[0].lstrip("| ") for l in missed) if missed else "")
                 + ".")
    return "\n".join(lines) + "\n"


def regress_section(base):
    lines = ["## Regressions: ferret now vs an earlier ferret", "",
             f"Machine: {machine()}; compared with ferret {sh(f'git rev-parse --short {base}')}.", "",
             f"Command: `BASE={base} bench/regress.sh` (RUNS=20 by default): both binaries run the same "
             "`ferret call` on the kernel tree side by side in one hyperfine run; ratio = now / before.", "",
             "| row | before median (ms) | now median (ms) | ratio | no slower (≤ 1.05) |",
             "| --- | ---: | ---: | ---: | --- |"]
    slower = []
    for line in open(f"{OUT}/regress.tsv"):
        label, path = line.rstrip("\n").split("\t")
        res = json.load(open(path))["results"]
        before, now = res[0]["median"] * 1000, res[1]["median"] * 1000
        ratio = now / before
        ok = ratio <= 1.05
        if not ok:
            slower.append(label)
        lines.append(f"| {label} | {before:.0f} | {now:.0f} | {ratio:.2f} | {'yes' if ok else 'NO'} |")
    lines += ["", "Verdict (from the rows above): " + (
        "no row is slower than before beyond 5% noise." if not slower
        else f"{len(slower)} row(s) slower than before beyond 5%: {', '.join(slower)}.")]
    return "\n".join(lines) + "\n"


def merge(section_name, text):
    path = "BENCHMARKS.md"
    head = "# Benchmarks\n\nSpeed and memory targets are checked here, never by timed tests. Rerun a section with its command.\n\n"
    body = open(path).read() if os.path.exists(path) else head
    start = f"<!-- {section_name} -->"
    end = f"<!-- /{section_name} -->"
    block = f"{start}\n{text}{end}\n"
    if start in body:
        a = body.index(start)
        b = body.index(end) + len(end) + 1
        body = body[:a] + block + body[b:]
    else:
        body = body.rstrip("\n") + "\n\n" + block
    open(path, "w").write(body)
    print(text)


def mcp_section(corpus, official_version):
    r = json.load(open(f"{OUT}/mcp.json"))
    lat, g, c = r["latency"], r["glob"], r["cancel"]
    speedup = g["official_s"] / g["ferret_s"]
    speedup_default = g["official_s"] / g["ferret_default_s"]
    sdk = sh("target/pyenv/bin/pip show mcp | awk '/^Version/ {print $2}'")
    return "\n".join([
        "## MCP: ferret serve vs the official filesystem server", "",
        f"Machine: {machine()}; @modelcontextprotocol/server-filesystem {official_version} on node "
        f"{sh('node --version')}; client: the official MCP Python SDK {sdk}, "
        "one stdio session per server.", "",
        "Command: `bench/mcp.sh`.", "",
        "| row | ferret | official server | ratio | target |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| file_exists tools/call latency, p50 ({lat['calls']} calls) | {lat['p50_ms']:.3f} ms | | | < 1 ms: "
        f"{'met' if lat['p50_ms'] < 1 else 'MISSED'} |",
        f"| file_exists tools/call latency, p99 | {lat['p99_ms']:.3f} ms | | | |",
        f"| glob `**/*.c` over the kernel tree, ferret's default call (first 100 paths + the true count; "
        f"median of {g['runs']}) | {g['ferret_default_s'] * 1000:.0f} ms | {g['official_s'] * 1000:.0f} ms "
        f"({g['official_files']} paths) | {speedup_default:.0f}× faster | ≥ 50×: "
        f"{'met' if speedup_default >= 50 else 'MISSED'} |",
        f"| glob `**/*.c`, every path returned (max_results 0) | {g['ferret_s'] * 1000:.0f} ms "
        f"({g['ferret_files']} paths) | {g['official_s'] * 1000:.0f} ms ({g['official_files']} paths) | "
        f"{speedup:.0f}× faster | |",
        f"| cancel a kernel-tree grep: control back after cancelling | {c['control_back_ms']:.1f} ms | | | < 100 ms: "
        f"{'met' if c['control_back_ms'] < 100 else 'MISSED'} |",
        f"| … next call on the same session answered in | {c['next_call_ms']:.1f} ms | | | |",
        f"| … the grep's audit record | {c['grep_result']} after {c['grep_ran_ms']:.0f} ms | | | stopped: "
        f"{'met' if c['grep_result'] == 'CANCELLED' else 'MISSED'} |",
        "",
        "Notes:",
        "- The latency includes the Python client's own encoding and decoding of each message.",
        "- The official server always returns every match (full paths, directories included, which is why its "
        "count differs by two); ferret's default returns the first 100 paths in order with the true count and "
        "`truncated`, which is what an agent asks for; the all-paths row asks ferret for everything.",
        ("- Verdict (from the rows above): the ≥ 50× glob target is "
         + (f"met ({speedup_default:.0f}× with ferret's default call)." if speedup_default >= 50 else
            f"missed ({speedup_default:.0f}× with ferret's default call). The search rows above put the walk "
            "itself beside fd; the next step is not walking at all (the live index of the instant-search "
            "issue).")),
    ]) + "\n"


def index_section(corpus, official_version):
    r = json.load(open(f"{OUT}/index.json"))
    sdk = sh("target/pyenv/bin/pip show mcp | awk '/^Version/ {print $2}'")
    ok = lambda b: "met" if b else "MISSED"
    lines = ["## Instant search: the live index", "",
             f"Corpus: Linux 6.1 source (Debian linux-source-6.1), warm cache. Machine: {machine()}; "
             f"@modelcontextprotocol/server-filesystem {official_version}; client: the official MCP Python SDK {sdk}.",
             "",
             "Command: `bench/index.sh` (INDEX_RUNS=30 calls per indexed row, SCAN_RUNS=5 for the `--no-index` "
             "server and rg). One run starts both servers side by side: `ferret serve` (building its index in "
             "the background) and `ferret serve --no-index`; rg is a fresh process per search (`rg -l`, `-n`, "
             "`-c` as the row asks). Times are tools/call round trips as the client sees them.", "",
             "| search | index p50 (ms) | index p99 (ms) | --no-index p50 (ms) | cold rg (ms) | rg / index | target |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    verdicts = []
    for q in r["queries"]:
        ix, sc, rg = q["index"], q["scan"], q["rg_ms"]
        selective = "trigram" not in q["name"]
        if selective:
            met = ix["p50_ms"] <= 10 and rg / ix["p50_ms"] >= 30
            tgt = f"p50 ≤ 10 ms and ≥ 30× rg: {ok(met)}"
        else:
            met = ix["p50_ms"] <= sc["p50_ms"] * 1.05
            tgt = f"no slower than the scan (≤ 1.05× --no-index): {ok(met)}"
        verdicts.append(met)
        lines.append(f"| {q['name']} (`{json.dumps(q['args'])}`, {ix['files']} files) | {ix['p50_ms']:.1f} | "
                     f"{ix['p99_ms']:.1f} | {sc['p50_ms']:.0f} | {rg:.0f} | {rg / ix['p50_ms']:.0f}× | {tgt} |")
    g = r["glob"]
    glob_met = g["index"]["p50_ms"] <= 10
    verdicts.append(glob_met)
    lines += ["", "| row | figure | target |", "| --- | ---: | --- |",
              f"| MCP glob `**/*.c` (first 100 + true count {g['index']['count']}), index p50 | "
              f"{g['index']['p50_ms']:.1f} ms (--no-index {g['scan']['p50_ms']:.0f} ms; official server "
              f"{g['official']['p50_ms']:.0f} ms, {g['official']['p50_ms'] / g['index']['p50_ms']:.0f}× slower) | "
              f"≤ 10 ms: {ok(glob_met)} |"]
    b = r["build_s"] <= 20
    m = r["build_peak_rss_mb"] <= 600
    w = r["warm_anon_mb"] <= 200
    f = r["fresh"]
    fresh = f["created_found"] and f["appended_found"] and f["deleted_gone"]
    d, rs = r["disk"], r["restart"]
    share = 100 * d["index_bytes"] / d["content_bytes"]
    disk, restart, rw = share <= 35, rs["answer_s"] <= 2, rs["warm_anon_mb"] <= 200
    parity = not r["parity"]["differ"]
    verdicts += [b, m, w, fresh, disk, restart, rw, parity]
    lines += [f"| index build, server start to first indexed answer | {r['build_s']:.1f} s | ≤ 20 s: {ok(b)} |",
              f"| peak RSS during the build (VmHWM) | {r['build_peak_rss_mb']:.0f} MB | ≤ 600 MB: {ok(m)} |",
              f"| server RSS when warm (anonymous; total {r['warm_rss_mb']:.0f} MB) | {r['warm_anon_mb']:.0f} MB | "
              f"≤ 200 MB: {ok(w)} |",
              f"| index on disk (`ferret index status`) | {d['index_bytes'] / 1e6:.0f} MB for {d['content_bytes'] / 1e6:.0f} MB "
              f"indexed in {d['files']} files: {share:.1f}% | ≤ 35% of the bytes indexed: {ok(disk)} |",
              f"| restarted server (same state directory): start to first indexed answer | {rs['answer_s']:.2f} s "
              f"(then rare literal p50 {rs['rows']['rare literal']['p50_ms']:.1f} ms, glob p50 {rs['glob']['p50_ms']:.1f} ms) "
              f"| ≤ 2 s: {ok(restart)} |",
              f"| restarted server RSS when warm (anonymous; total {rs['warm_rss_mb']:.0f} MB, the rest mapped from the "
              f"index file; after the same five searches and the parity questions) | {rs['warm_anon_mb']:.0f} MB | ≤ 200 MB: {ok(rw)} |",
              f"| a file written by another process, searched 50 ms later | created {ok(f['created_found'])}, "
              f"appended {ok(f['appended_found'])}, deleted {ok(f['deleted_gone'])}; first search after the "
              f"create (a list refresh) {f['first_search_after_create_ms']:.0f} ms | found: {ok(fresh)} |",
              f"| parity: index answers vs --no-index answers (grep and glob) | {r['parity']['compared']} compared, "
              f"{len(r['parity']['differ'])} differ | identical: {ok(not r['parity']['differ'])} |",
              "", "Notes:",
              "- Once built, the server writes its index to its state directory and maps it: the posting lists "
              "are then file-backed pages, not anonymous memory (the first server's warm row is measured after "
              "that). A restarted server maps the file, walks the tree once to compare stamps and re-reads only "
              "files that changed.",
              "- The first search after a file is created, renamed or deleted pays a refresh: a walk of the "
              "changed directory's subtree that stats its files and re-reads only changed ones (the bench "
              "creates a file in drivers/net/ethernet/intel/e1000); a file written in place costs nothing extra.",
              "- The build row: the client polls every 50 ms with a grep in one small directory (`usr/`) "
              "until the answer says `index`. Until then each poll scans; runs before 2026-11-23 polled the "
              "whole tree, so the build shared both cores with a scan of the tree twenty times a second.",
              "- Cold all-paths CLI glob vs fd is in the search section above.",
              f"- Page cache: the bench reads the whole tree (rg -uuu, no match) just before starting the servers: "
              f"{r['warm_s'][0]:.1f} s, then {r['warm_s'][1]:.1f} s for a second read. This VM runs DAMON with a "
              f"pageout scheme that evicts file pages idle for 60 s, so a tree read by earlier runs is not "
              f"resident any more: a build on it measured the disk (20 s against 14 s warm in an earlier session).",
              "- Files of 32 KiB or more carry a 4-gram Bloom filter in the index (one bit per byte), checked on "
              "a literal's candidates before any is read; it is part of the disk row above.",
              ("- Verdict (from the rows above): " + (f"{sum(verdicts)} of {len(verdicts)} measured targets met"
               + (", all of them." if all(verdicts) else "; the missed ones are marked MISSED.")))]
    return "\n".join(lines) + "\n", not r["parity"]["differ"]


def workbench_section(corpus, official_version):
    r = json.load(open(f"{OUT}/workbench.json"))
    e, o, p, b = r["edit"], r["official_edit"], r["patch"], r["budget"]
    sdk = sh("target/pyenv/bin/pip show mcp | awk '/^Version/ {print $2}'")
    ratio = e["p50_ms"] / o["p50_ms"]
    fits = b["text_chars"] <= b["budget"] and b["structured_chars"] <= b["budget"]
    compare = (f"{1 / ratio:.1f}× faster than" if ratio < 1 else f"{ratio:.1f}× slower than")
    return "\n".join([
        "## Workbench: edits, patches and the output budget over MCP", "",
        f"Machine: {machine()}; @modelcontextprotocol/server-filesystem {official_version} on node "
        f"{sh('node --version')}; client: the official MCP Python SDK {sdk}, one stdio session per server.", "",
        "Command: `bench/workbench.sh`. Edits and patches run on scratch copies of 20 kernel source files "
        "(never the corpus); ferret backs up, journals and fsyncs every change, the official server does none "
        "of that.", "",
        "| row | ferret | official server | ratio |",
        "| --- | ---: | ---: | ---: |",
        f"| edit one string in a 100 KB-class file, p50 ({e['calls']} calls) | {e['p50_ms']:.2f} ms | "
        f"{o['p50_ms']:.2f} ms (edit_file) | {ratio:.2f} |",
        f"| … p99 | {e['p99_ms']:.2f} ms | {o['p99_ms']:.2f} ms | {e['p99_ms'] / o['p99_ms']:.2f} |",
        f"| apply_patch, 20 files one hunk each, p50 ({p['calls']} calls) | {p['p50_ms']:.2f} ms | (no such tool) | |",
        f"| … p99 | {p['p99_ms']:.2f} ms | | |",
        f"| grep `return`, content mode, every match asked for (kernel tree) | {b['text_chars']} characters of text, "
        f"{b['structured_chars']} of JSON, in {b['seconds'] * 1000:.0f} ms; {b['left_lines']} of {b['match_count']} "
        f"matching lines and {b['left_files']} of {b['file_count']} files said to be left out | | |",
        "",
        "Verdicts (from the rows above):",
        f"- ferret's edit p50 is {compare} the official server's edit_file, with a backup, a journal entry "
        "and fsyncs in it.",
        f"- the common-word grep {'fits' if fits else 'does NOT fit'} max_output_chars ({b['budget']} "
        "characters) in both its text and its JSON.",
    ]) + "\n"


def load_section():
    r = json.load(open(f"{OUT}/load.json"))
    sdk = sh("target/pyenv/bin/pip show mcp | awk '/^Version/ {print $2}'")
    grown = r["rss_kib_at_end"] / r["rss_kib_at_10s"] if r["rss_kib_at_10s"] else float("inf")
    checks = [
        ("0 protocol errors", r["protocol_error_count"] == 0, f"{r['protocol_error_count']}"),
        ("0 lost edits", r["lost_count"] == 0, f"{r['lost_count']}"),
        ("every undo consistent", r["bad_undos"] == 0, f"{r['bad_undos']} inconsistent"),
        ("server RSS, end ≤ 1.25× the RSS at 10 s (warm-up included)", grown <= 1.25,
         f"{r['rss_kib_at_10s'] / 1024:.0f} MB at 10 s, {r['rss_kib_at_end'] / 1024:.0f} MB at the end "
         f"({grown:.2f}×), {r['rss_kib_max'] / 1024:.0f} MB peak"),
    ]
    every = r.get("rss_kib_every_5s", [])
    half = every[len(every) // 2] if every else 0
    if half:
        # Flat once warm: all sessions open and the bounded caches (journal window, audit
        # memory) full by half time; a leak would go on growing in the second half.
        warm = r["rss_kib_at_end"] / half
        checks.append(("server RSS flat once warm (end ≤ 1.10× the RSS at half time)", warm <= 1.10,
                       f"{half / 1024:.0f} MB at half time, {r['rss_kib_at_end'] / 1024:.0f} MB at the end "
                       f"({warm:.2f}×)"))
    if r.get("rss_kib_after_close"):
        checks.append(("memory handed back once sessions close (≤ 1.0× the RSS at the end)",
                       r["rss_kib_after_close"] <= r["rss_kib_at_end"],
                       f"{r['rss_kib_after_close'] / 1024:.0f} MB 11 s after the last session closed"))
    lines = ["## HTTP load: concurrent sessions", "",
             f"Machine: {machine()}; client: the official MCP Python SDK {sdk}, in one process on the same "
             "machine (it shares the 2 cores with the server).", "",
             f"Command: `bench/load.sh`. {r['sessions']} sessions at once over loopback HTTP for "
             f"{r['seconds']:.0f} s, half on protocol 2026-07-28 and half on the 2025-11-25 handshake, each "
             "looping over grep (a 300-file tree), read_file, edit and write_file of its own files, and undo "
             "of its own last change (read back at once; the undo's time is its own call). The server runs "
             "`--no-index`, writes on, round budgets off.", "",
             f"{r['calls']} calls in all.", "",
             "| call | calls | p50 (ms) | p99 (ms) |", "| --- | ---: | ---: | ---: |"]
    for op, x in r["per_op"].items():
        lines.append(f"| {op} | {x['calls']} | {x['p50_ms']:.1f} | {x['p99_ms']:.1f} |")
    lines.append(f"| all | {r['calls']} | {r['all']['p50_ms']:.1f} | {r['all']['p99_ms']:.1f} |")
    lines += ["", "| check | result | measured |", "| --- | --- | --- |"]
    for name, ok, got in checks:
        lines.append(f"| {name} | {'met' if ok else 'MISSED'} | {got} |")
    if r["tool_error_count"]:
        lines += ["", f"Tool errors ({r['tool_error_count']}): " + "; ".join(r["tool_errors"][:5])]
    if r["protocol_error_count"]:
        lines += ["", "Protocol errors: " + "; ".join(r["protocol_errors"][:5])]
    lines += ["", "RSS every 5 s (MB): " + ", ".join(f"{k / 1024:.0f}" for k in r.get("rss_kib_every_5s", []))]
    try:
        d = json.load(open(f"{OUT}/load-default-arenas.json"))
    except FileNotFoundError:
        d = None
    if d:
        # The same load run right after with glibc's default arena count: what the
        # server's one-arena setting is worth, measured rather than claimed.
        def mb(x):
            return f"{x / 1024:.0f}"

        def row(name, x):
            ev = x.get("rss_kib_every_5s", [])
            h = ev[len(ev) // 2] if ev else 0
            return (f"| {name} | {x['calls']} | {x['all']['p50_ms']:.0f} | {mb(x['rss_kib_at_10s'])} | {mb(h)} | "
                    f"{mb(x['rss_kib_at_end'])} | {x['rss_kib_at_end'] / x['rss_kib_at_10s']:.2f}× | "
                    f"{mb(x['rss_kib_after_close'])} |")
        lines += ["", "The allocator setting, side by side (the same load run again right after, with "
                  "`MALLOC_ARENA_MAX` set to glibc's default of 8 arenas per core):", "",
                  "| server | calls | p50 (ms) | RSS at 10 s (MB) | at half time | at the end | end / 10 s | "
                  "after close |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
                  row("one arena (ferret's setting)", r), row("glibc's default arenas", d)]
        rel = (r["rss_kib_at_end"] - r["rss_kib_at_10s"]) / max(1, d["rss_kib_at_end"] - d["rss_kib_at_10s"])
        lines += ["", f"From 10 s to the end the server grew {mb(r['rss_kib_at_end'] - r['rss_kib_at_10s'])} MB with "
                  f"one arena and {mb(d['rss_kib_at_end'] - d['rss_kib_at_10s'])} MB with glibc's default "
                  f"({rel:.2f}× as much), answering {r['calls'] / d['calls']:.2f}× as many calls."]
    lines += ["", "Notes:",
              "- `WEIGHTS=grep,read,edit,write,undo` (default 3,3,2,1,1), `SESSIONS` and `SECONDS` reshape the "
              "load.",
              "- History of this section: on 8a7cb09, where every change re-read the whole undo journal (1.5 MB "
              "after 2 500 edits), the same load made 8 371 calls, edit p50 677 ms and p99 3.1 s, and the server "
              "grew from 48 to 245 MB; side runs (50 sessions, 25 s) grew 33 → 39 MB read-only and 47 → 84 MB "
              "edit-only. 43e9a64 reads the journal incrementally; it still grew 39 → 112 MB. heaptrack then "
              "showed the live heap peaking under 30 MB while the resident size drifted past 85 MB: the "
              "allocator's, not ferret's. The server now fixes glibc's mmap threshold (large blocks in their own "
              "mappings, given back on free), trims every 10 s under load, runs at most 32 calls at once, and "
              "keeps bounded windows of the journal (the last 1 000 changes, 1 125 at most) and of the audit "
              "records (2 000) in memory. On 22f3293 that still grew 36 → 57 MB (10 s to the end). cf32b12 "
              "caps glibc at one arena (the allocator rows above); 65fb493 trims the journal window at 1 125 "
              "entries rather than 2 000 (it had taken 20 s of this load to fill, then swung by 1 000 entries) "
              "and stops copying it for every undo. Tried and not taken, one run each beside "
              "glibc's default (37 → 53 MB): jemalloc (tikv-jemallocator 0.7) grew 52 → 65 MB, mimalloc "
              "0.1.52 held 230–350 MB.",
              "- The 10 s row includes the warm-up: 100 sessions connecting and those windows filling. The "
              "once-warm row compares the end with half time, when both are done; a leak grows there."]
    met = sum(ok for _, ok, _ in checks)
    lines += ["", f"Verdict (from the rows above): {met} of {len(checks)} checks met."]
    return "\n".join(lines) + "\n"


def safety_section(base_rev):
    """Issue #25's resource targets: hostile request shapes, hostile ignore files and slow
    HTTP clients, this build beside an earlier one (BASE) where that one ran."""
    now = json.load(open(f"{OUT}/hostile.json"))
    base = json.load(open(f"{OUT}/hostile-base.json")) if os.path.exists(f"{OUT}/hostile-base.json") else None
    slow = json.load(open(f"{OUT}/slowclients.json"))
    slow_base = (json.load(open(f"{OUT}/slowclients-base.json"))
                 if os.path.exists(f"{OUT}/slowclients-base.json") else None)
    lines = ["## Safety: hostile requests, hostile ignore files, slow clients", "",
             f"Machine: {machine(peers=False)}; ferret {open(f'{OUT}/safety-rev').read().strip()} "
             f"(the build measured). Base: {base_rev} (the build before issue #25's round 3).", "",
             "Command: `bench/safety.sh [BASE_REV]` (bench/hostile.py: eight ~4 MB requests of different "
             "shapes sent at once on one stdio session, then a normal grep; peak RSS is the server's VmHWM; "
             "then greps over hostile ignore files; bench/slowclients.py: 3 000 slow connections on loopback "
             "kept up while 20 normal `initialize` requests are timed).", "",
             "| row | base | now | target |", "| --- | ---: | ---: | --- |"]
    checks = []

    def burst_row(i):
        b = base["bursts"][i] if base and len(base["bursts"]) > i else None
        n = now["bursts"][i]
        lines.append(f"| {n['title']}: peak RSS (MiB) | {b['peak_mib'] if b else '—'} | {n['peak_mib']} | "
                     f"< 1024 |")
        lines.append(f"| {n['title']}: a normal grep beside them (ms) | "
                     f"{b['normal_ms_during'] if b else '—'} ({b['normal_outcome'] if b else '—'}) | "
                     f"{n['normal_ms_during']} ({n['normal_outcome']}) | answered |")
        return n
    n = burst_row(0)
    checks.append(("eight concurrent hostile 4 MB requests keep peak RSS under 1 GB and a normal request answers",
                   n["peak_mib"] < 1024 and n["normal_outcome"] == "ok"))
    if len(now["bursts"]) > 1:
        n = burst_row(1)
        checks.append(("eight requests just under the caps keep peak RSS under 1 GB and a normal request answers",
                       n["peak_mib"] < 1024 and n["normal_outcome"] == "ok"))
    for i, n in enumerate(now["ignore"]):
        b = base["ignore"][i] if base and len(base["ignore"]) > i else None
        fmt = lambda r: f"{r['seconds']} s, {r['peak_mib']} MiB, {r['outcome']}" + (", warned" if r["warned"] else "")
        lines.append(f"| {n['label']} | {fmt(b) if b else '—'} | {fmt(n)} | answered with a warning, < 1024 MiB, "
                     "within the 5 s timeout |")
        checks.append((f"{n['label']}: answered with a warning, under 1 GB, within the timeout",
                       n["outcome"] == "ok" and n["warned"] and n["peak_mib"] < 1024 and n["seconds"] < 5))

    def slow_cell(r):
        if not r:
            return "—"
        return (f"{r['normal_answered']} of {r['normal_requests']} answered, max "
                f"{r['normal_ms_max'] if r['normal_ms_max'] is not None else '—'} ms")
    lines.append(f"| normal requests beside {slow['slow_connections_target']} slow connections | "
                 f"{slow_cell(slow_base)} | {slow_cell(slow)} | all answered within 5 000 ms |")
    checks.append((f"a normal request answered within 5 s beside {slow['slow_connections_target']} slow connections",
                   slow["normal_requests"] > 0 and slow["normal_answered"] == slow["normal_requests"]
                   and slow["normal_ms_max"] is not None and slow["normal_ms_max"] < 5000))
    lines += ["", f"Slow connections: {slow['slow_connections_opened']} opened by the attacker "
              f"({slow['slow_connections_target']} reached in {slow['seconds_to_open_target']} s), at least "
              f"{slow['slow_held_by_client_min']} still open on its side when each normal request was sent "
              "(the server closes the oldest idle ones at its cap; the attacker replaces them).", ""]
    lines += [f"- {'met' if ok else 'MISSED'}: {name}" for name, ok in checks]
    met = sum(ok for _, ok in checks)
    lines += ["", f"Verdict (from the rows above): {met} of {len(checks)} targets met."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1] == "search":
        merge("search", search_section(sys.argv[2]))
    elif sys.argv[1] == "regress":
        merge("regress", regress_section(sys.argv[2]))
    elif sys.argv[1] == "mcp":
        merge("mcp", mcp_section(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "index":
        text, parity = index_section(sys.argv[2], sys.argv[3])
        merge("index", text)
        if not parity:
            sys.exit("index answers differ from scan answers: see bench/results/index.json")
    elif sys.argv[1] == "workbench":
        merge("workbench", workbench_section(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "load":
        merge("load", load_section())
    elif sys.argv[1] == "safety":
        merge("safety", safety_section(sys.argv[2]))
