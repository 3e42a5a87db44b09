#!/usr/bin/env bash
# The workbench rows: edit and apply_patch latency over MCP (beside the official
# filesystem server's edit_file), and a grep for a common word against the output budget.
# Writes the "workbench" section of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
"$VENV/bin/python" bench/workbench_bench.py "$PWD/target/release/ferret" "$K" "$OFFICIAL" > bench/results/workbench.json
python3 bench/report.py workbench "$K" "$OFFICIAL_VERSION"
