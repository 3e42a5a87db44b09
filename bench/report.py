"""Turns bench/results/*.tsv + hyperfine JSON into a section of BENCHMARKS.md."""
import json, os, platform, subprocess, sys

OUT = "bench/results"


def sh(cmd):
    try:
        return subprocess.check_output(cmd, shell=True, text=True, stderr=subprocess.DEVNULL).strip()
    except subprocess.CalledProcessError:
        return "?"


def machine():
    cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    mem = sh("free -g | awk '/Mem:/ {print $2}'")
    return (f"{sh('nproc')} cores ({cpu}), {mem} GiB RAM, Linux {platform.release()}; "
            f"{sh('rg --version | head -1')}, {sh('fd --version')}, {sh('hyperfine --version')}, "
            f"ferret {sh('git rev-parse --short HEAD')}")


def search_section(corpus):
    files = sh(f"find {corpus} -type f | wc -l")
    size = sh(f"du -sh {corpus} | cut -f1")
    lines = ["## Search: ferret vs ripgrep and fd", "",
             f"Corpus: Linux 6.1 source (Debian linux-source-6.1), {size}, {files} files, warm cache.",
             f"Machine: {machine()}.", "",
             "Command: `bench/search.sh` (RUNS=10 by default). Every grep pattern was first checked to give "
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
        target = 1.10
        worst = max(worst, ratio)
        lines.append(f"| {label} | {'fd' if is_glob else 'rg'} | {peer:.0f} | {fer:.0f} | {ratio:.2f} | "
                     f"{'≤ 1.10 ' + ('met' if ratio <= target else 'MISSED')} |")
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
              "count)."]
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


if __name__ == "__main__":
    if sys.argv[1] == "search":
        merge("search", search_section(sys.argv[2]))
