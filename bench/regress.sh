#!/usr/bin/env bash
# ferret now vs ferret at an earlier revision, side by side in one run, on the search
# rows of bench/search.sh: did any row get slower? Writes the `regress` section of
# BENCHMARKS.md (bench/report.py), with the verdicts computed from the medians.
#
#   BASE=<git revision> bench/regress.sh        # builds BASE in a temporary worktree
#   BASE=<rev> OLD_BIN=/path/to/ferret bench/regress.sh   # or uses a binary built from it
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
BASE=${BASE:?set BASE to the git revision to compare with}
K=$(bench/setup.sh | tail -1)
cargo build --release -q
NEW="$PWD/target/release/ferret"
if [ -z "${OLD_BIN:-}" ]; then
  WT=$(mktemp -d)
  git worktree add -q --detach "$WT" "$BASE"
  (cd "$WT" && cargo build --release -q)
  OLD_BIN="$WT/target/release/ferret"
fi
OUT="$PWD/bench/results"
mkdir -p "$OUT"
RUNS=${RUNS:-20}
FIELDS=(
  "rare literal|\"pattern\":\"PM_RESUME\""
  "common literal|\"pattern\":\"return\""
  "case-insensitive|\"pattern\":\"pm_resume\",\"ignore_case\":true"
  "regex with classes|\"pattern\":\"[A-Z]+_SUSPEND\""
  "no match|\"pattern\":\"zzqqNOMATCHqqzz\""
)
: > "$OUT/regress.tsv"
row() { # label, arguments of `ferret call`
  local label=$1 json="$OUT/rg-$(echo "$1" | tr -c 'a-z0-9' '-').json"
  hyperfine -N -i -w 2 -r "$RUNS" --export-json "$json" \
    "$OLD_BIN --root $K call $2" "$NEW --root $K call $2" >/dev/null
  printf '%s\t%s\n' "$label" "$json" >> "$OUT/regress.tsv"
  echo "timed: $label"
}
for p in "${FIELDS[@]}"; do
  IFS='|' read -r name fields <<< "$p"
  row "$name, count" "grep '{$fields,\"output_mode\":\"count\"}'"
  row "$name, files" "grep '{$fields}'"
  row "$name, content" "grep '{$fields,\"output_mode\":\"content\"}'"
done
row "glob *.c (all paths)" "glob '{\"pattern\":\"*.c\",\"max_results\":0}'"
row "glob *.c (first 100)" "glob '{\"pattern\":\"*.c\"}'"
python3 bench/report.py regress "$BASE"
