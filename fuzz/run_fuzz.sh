#!/usr/bin/env bash
# run_fuzz.sh FUZZER CORPUS ARTIFACTS SECONDS: replays CORPUS, then fuzzes
# for SECONDS on a copy of it (the checked-in corpus stays as it is). Exits
# non-zero on any crash, leak, timeout or sanitizer report; the input that
# caused it is kept in ARTIFACTS.
set -euo pipefail
fuzzer=$1 corpus=$2 artifacts=$3 seconds=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R "$corpus"/. "$work"/
mkdir -p "$artifacts"
# Symbolized stacks in reports, where an LLVM symbolizer is installed.
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" ]] && command -v llvm-symbolizer >/dev/null; then
  export ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer)
fi
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/$(basename "$fuzzer")-" "$work"
