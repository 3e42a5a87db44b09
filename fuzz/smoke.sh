#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a few seconds each, from the committed
# seeds, and fails on the first finding. CI runs it with the default; a long run is
# `FUZZ_SEED=0 fuzz/smoke.sh 600 TARGET` (fuzz/README.md gives the last one's result).
# The seed is fixed (1) unless FUZZ_SEED says otherwise: a CI run then mutates the same
# way every time, so it fails on a change, not on a lucky draw; 0 draws a new one.
#
# cargo-fuzz is installed (pinned) under target/tools. libFuzzer's instrumentation and
# AddressSanitizer need -Z flags: RUSTC_BOOTSTRAP lets the machine's stable toolchain
# take them, so no nightly toolchain has to be fetched.
set -euo pipefail
cd "$(dirname "$0")"
SECS="${1:-20}"
shift || true
TOOLS="$PWD/../target/tools"
if ! [ -x "$TOOLS/bin/cargo-fuzz" ]; then
  cargo install -q --locked --root "$TOOLS" cargo-fuzz --version 0.13.2
fi
export PATH="$TOOLS/bin:$PATH"
export RUSTC_BOOTSTRAP=1
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
for t in "${targets[@]}"; do
  corpus="$(mktemp -d)"
  echo "fuzz: $t for ${SECS}s"
  # New inputs go to a scratch corpus; the seeds are only read. A crash, a leak, a
  # timeout (10 s for one input) or 4 GB of memory is a finding: saved under
  # fuzz/artifacts/$t and the run fails.
  # The index loader must never allocate past a bound, whatever the file claims:
  # one allocation over 64 MB from an input of a few KB is a finding.
  extra=()
  if [ "$t" = index_load ]; then extra=(-malloc_limit_mb=64); fi
  if ! cargo fuzz run "$t" "$corpus" "seeds/$t" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    "${extra[@]}" \
    -seed="${FUZZ_SEED:-1}" \
    2> "$corpus.log"; then
    tail -60 "$corpus.log"
    exit 1
  fi
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+.*DONE)" "$corpus.log" || true
  rm -rf "$corpus" "$corpus.log"
done
