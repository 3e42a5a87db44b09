#!/usr/bin/env bash
# The workbench rows: edit and apply_patch latency over MCP (beside the official
# filesystem server's edit_file), and a grep for a common word against the output budget.
# Writes the "workbench" section of BENCHMARKS.md.
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
"$VENV/bin/python" bench/workbench_bench.py "$PWD/target/release/ferret" "$K" "$OFFICIAL" > bench/results/workbench.json
OFFICIAL_VERSION=$(node -p "require('$NPM/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")
python3 bench/report.py workbench "$K" "$OFFICIAL_VERSION"
