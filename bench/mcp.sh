#!/usr/bin/env bash
# The MCP rows: ferret vs the official @modelcontextprotocol/server-filesystem, with the
# same client (the official MCP Python SDK). Writes the "mcp" section of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
"$VENV/bin/python" bench/mcp_bench.py "$PWD/target/release/ferret" "$K" "$OFFICIAL" > bench/results/mcp.json
python3 bench/report.py mcp "$K" "$OFFICIAL_VERSION"
