# What the MCP benchmark scripts share: the corpus, a release build, the official
# filesystem server from npm and the Python SDK's venv. Source it from bench/*.sh; it sets
# K (the corpus), OFFICIAL (the server's entry point), OFFICIAL_VERSION and VENV.
export PATH="$HOME/.cargo/bin:$PATH"
K=$(bench/setup.sh | tail -1)
BENCH_DIR=$(dirname "$K")
cargo build --release -q
NPM="$BENCH_DIR/npm"
if [ ! -f "$NPM/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]; then
  mkdir -p "$NPM" && (cd "$NPM" && npm install -q --no-audit --no-fund @modelcontextprotocol/server-filesystem >/dev/null)
fi
OFFICIAL="$NPM/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
OFFICIAL_VERSION=$(node -p "require('$NPM/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")
VENV=target/pyenv
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV"; "$VENV/bin/pip" install -q -r tests/mcp/requirements.txt; }
mkdir -p bench/results
