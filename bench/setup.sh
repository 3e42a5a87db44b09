#!/usr/bin/env bash
# Prepares the benchmark corpus (the Linux 6.1 source from Debian) and the peers
# (ripgrep, fd, hyperfine). Idempotent. The corpus lives in $FERRET_BENCH_DIR, never in
# the repository.
set -euo pipefail
BENCH_DIR=${FERRET_BENCH_DIR:-$HOME/.cache/ferret-bench}
K="$BENCH_DIR/linux-source-6.1"
mkdir -p "$BENCH_DIR"
need_apt=()
[ -f /usr/src/linux-source-6.1.tar.xz ] || need_apt+=(linux-source-6.1)
command -v hyperfine >/dev/null || need_apt+=(hyperfine)
[ -x /usr/bin/time ] || need_apt+=(time)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if [ ! -f "$K/.ferret-ready" ]; then
  rm -rf "$K"
  tar xf /usr/src/linux-source-6.1.tar.xz -C "$BENCH_DIR"
  # Debian appends a block that ignores every top-level path; a gitignore-honouring
  # search would find nothing.
  sed -i '/^# Debian packaging/,$d' "$K/.gitignore"
  touch "$K/.ferret-ready"
fi
# The current releases, not Debian's older rg.
command -v rg >/dev/null && rg --version | grep -q '^ripgrep 15' || cargo install -q ripgrep
command -v fd >/dev/null && fd --version | grep -q '^fd 10' || cargo install -q fd-find
echo "$K"
