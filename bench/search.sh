#!/usr/bin/env bash
# ferret grep/glob vs ripgrep/fd on the Linux source tree, side by side in one run.
# Checks that both report the same files and counts for every pattern before timing it.
# Writes bench/results/search.md (merged into BENCHMARKS.md by bench/report.py).
#
# Matched settings:
# - rg: --no-require-git (ferret honours .gitignore outside a git repository, as seed 002
#   asks; the Debian tarball is not a repository), --ignore-file with ferret's deny list
#   (ferret never searches secrets; the kernel has one: a selftest .pem key).
# - both skip hidden files, binary files (NUL byte: the file contributes nothing) and
#   never follow symlinks; both use 2 threads on this 2-core machine.
# - ferret runs through `ferret call grep` (the tool API an agent uses) with its
#   defaults; in content mode it keeps the first 200 lines in path order (and counts
#   everything), where rg prints every line to /dev/null.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
K=$(bench/setup.sh | tail -1)
cargo build --release -q
F="$PWD/target/release/ferret"
OUT="$PWD/bench/results"
mkdir -p "$OUT"
RUNS=${RUNS:-20}
DENY="$OUT/deny.ignore"
"$F" config --json | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["config"]["deny"]))' > "$DENY"
RG=(rg --no-require-git --ignore-file "$DENY")
cd "$K"

# name | rg flags | ferret JSON fields
PATTERNS=(
  "rare literal|PM_RESUME|\"pattern\":\"PM_RESUME\""
  "common literal|-e return|\"pattern\":\"return\""
  "case-insensitive|-i -e pm_resume|\"pattern\":\"pm_resume\",\"ignore_case\":true"
  "regex with classes|-e [A-Z]+_SUSPEND|\"pattern\":\"[A-Z]+_SUSPEND\""
  "no match|-e zzqqNOMATCHqqzz|\"pattern\":\"zzqqNOMATCHqqzz\""
)

check() { # same files and counts, or the benchmark stops
  local name=$1 rgflags=$2 fields=$3
  # shellcheck disable=SC2086
  "${RG[@]}" --count $rgflags | LC_ALL=C sort > /tmp/ferret-bench-rg.txt || true
  "$F" --root "$K" call grep "{$fields,\"output_mode\":\"count\",\"max_results\":0}" \
    | python3 -c 'import json,sys; [print("%s:%d" % (f["path"], f["count"])) for f in json.load(sys.stdin)["files"]]' \
    | LC_ALL=C sort > /tmp/ferret-bench-fe.txt
  if ! cmp -s /tmp/ferret-bench-rg.txt /tmp/ferret-bench-fe.txt; then
    echo "MISMATCH for $name:"; diff /tmp/ferret-bench-rg.txt /tmp/ferret-bench-fe.txt | head -20; exit 1
  fi
  echo "parity ok: $name ($(wc -l < /tmp/ferret-bench-fe.txt) files)"
}

: > "$OUT/rows.tsv"
row() { # label, rg command, ferret command
  local label=$1 rgcmd=$2 fecmd=$3 json="$OUT/hf-$(echo "$1" | tr -c 'a-z0-9' '-').json"
  hyperfine -N -i -w 2 -r "$RUNS" --export-json "$json" "$rgcmd" "$fecmd" >/dev/null
  printf '%s\t%s\n' "$label" "$json" >> "$OUT/rows.tsv"
  echo "timed: $label"
}

for p in "${PATTERNS[@]}"; do
  IFS='|' read -r name rgflags fields <<< "$p"
  check "$name" "$rgflags" "$fields"
  rgbase="${RG[*]} $rgflags"
  row "$name, count" "$rgbase --count" "$F --root $K call grep '{$fields,\"output_mode\":\"count\"}'"
  row "$name, files" "$rgbase --files-with-matches" "$F --root $K call grep '{$fields}'"
  row "$name, content" "$rgbase --line-number" "$F --root $K call grep '{$fields,\"output_mode\":\"content\"}'"
done

# glob vs fd: same file list first
fd --no-require-git --ignore-file "$DENY" -t f -e c | LC_ALL=C sort > /tmp/ferret-bench-fd.txt
"$F" --root "$K" call glob '{"pattern":"*.c","max_results":0}' \
  | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["files"]))' | LC_ALL=C sort > /tmp/ferret-bench-fg.txt
cmp -s /tmp/ferret-bench-fd.txt /tmp/ferret-bench-fg.txt || { echo "MISMATCH glob vs fd"; diff /tmp/ferret-bench-fd.txt /tmp/ferret-bench-fg.txt | head; exit 1; }
echo "parity ok: glob *.c ($(wc -l < /tmp/ferret-bench-fg.txt) files)"
row "glob *.c (all paths)" "fd --no-require-git --ignore-file $DENY -t f -e c" "$F --root $K call glob '{\"pattern\":\"*.c\",\"max_results\":0}'"
row "glob *.c (first 100)" "fd --no-require-git --ignore-file $DENY -t f -e c" "$F --root $K call glob '{\"pattern\":\"*.c\"}'"

# peak RSS (KiB): max of 3 runs each
rss() { local m=0 v; for _ in 1 2 3; do v=$( { /usr/bin/time -v "$@" >/dev/null; } 2>&1 | awk '/Maximum resident/ {print $6}'); [ "$v" -gt "$m" ] && m=$v; done; echo "$m"; }
{
  printf 'rare literal, count\t%s\t%s\n' "$(rss "${RG[@]}" --count PM_RESUME)" \
    "$(rss "$F" --root "$K" call grep '{"pattern":"PM_RESUME","output_mode":"count"}')"
  printf 'every line (^), content\t%s\t%s\n' "$(rss "${RG[@]}" --line-number -e '^')" \
    "$(rss "$F" --root "$K" call grep '{"pattern":"^","output_mode":"content"}')"
  printf 'every line (^), count\t%s\t%s\n' "$(rss "${RG[@]}" --count -e '^')" \
    "$(rss "$F" --root "$K" call grep '{"pattern":"^","output_mode":"count"}')"
} > "$OUT/rss.tsv"
echo "rss done"
cd - >/dev/null
python3 bench/report.py search "$K"
