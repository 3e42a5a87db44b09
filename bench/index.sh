#!/usr/bin/env bash
# The live index rows: a warm `ferret serve` with its index vs the same server with
# --no-index vs a cold rg per search, and glob vs the official filesystem server, all
# through the official MCP Python SDK in one run. Checks parity (fails on a difference)
# and freshness. Writes the "index" section of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
"$VENV/bin/python" bench/index_bench.py "$PWD/target/release/ferret" "$K" "$OFFICIAL" > bench/results/index.json
python3 bench/report.py index "$K" "$OFFICIAL_VERSION"
