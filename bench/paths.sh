#!/usr/bin/env bash
# Memory over a hostile tree of long paths (issue #25, round 13), this build beside an
# optional BASE_BIN (an earlier ferret binary). The tree (~1 GB of directory entries) is
# made once under ${FERRET_BENCH_DIR:-~/.cache/ferret-bench}/long-paths. Writes the "paths"
# section of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --locked
mkdir -p bench/results
TREE="${FERRET_BENCH_DIR:-$HOME/.cache/ferret-bench}/long-paths"
mkdir -p "$TREE"
python3 bench/paths_bench.py "$TREE" "$PWD/target/release/ferret" ${1:+"$1"}
