#!/usr/bin/env bash
# The MCP rows: ferret vs the official @modelcontextprotocol/server-filesystem, with the
# same client (the official MCP Python SDK). Writes the "mcp" section of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
K=$(bench/setup.sh | tail -1)
BENCH_DIR=$(dirname "$K")
cargo build --release -q
NPM="$BENCH_DIR/npm"
if [ ! -f "$NPM/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]; then
  mkdir -p "$NPM" && (cd "$NPM" && npm install -q --no-audit --no-fund @modelcontextprotocol/server-filesystem >/dev/null)
fi
OFFICIAL="$NPM/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
VENV=target/pyenv
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV"; "$VENV/bin/pip" install -q -r tests/mcp/requirements.txt; }
mkdir -p bench/results
"$VENV/bin/python" bench/mcp_bench.py "$PWD/target/release/ferret" "$K" "$OFFICIAL" > bench/results/mcp.json
OFFICIAL_VERSION=$(node -p "require('$NPM/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")
python3 bench/report.py mcp "$K" "$OFFICIAL_VERSION"
