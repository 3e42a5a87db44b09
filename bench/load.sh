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
# The same load again with glibc's default arena count (8 per core), which the server
# otherwise caps at one: the allocator rows compare the two. COMPARE=0 skips it.
if [ "${COMPARE:-1}" != 0 ]; then
  MALLOC_ARENA_MAX=$((8 * $(nproc))) "$VENV/bin/python" bench/load_bench.py "$PWD/target/release/ferret" \
    > bench/results/load-default-arenas.json
else
  rm -f bench/results/load-default-arenas.json
fi
python3 bench/report.py load
