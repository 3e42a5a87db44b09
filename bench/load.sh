#!/usr/bin/env bash
# The HTTP load test (issue 14): 100 concurrent MCP sessions over loopback for 60 s,
# mixing grep, read_file, edit, write_file and undo, half on each protocol version, with
# the official MCP Python SDK. Writes the "load" section of BENCHMARKS.md.
# SESSIONS and SECONDS change the shape (defaults 100 and 60).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q
VENV=target/pyenv
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV"; "$VENV/bin/pip" install -q -r tests/mcp/requirements.txt; }
mkdir -p bench/results
"$VENV/bin/python" bench/load_bench.py "$PWD/target/release/ferret" > bench/results/load.json
python3 bench/report.py load
