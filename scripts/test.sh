#!/usr/bin/env bash
# Builds Berth and runs every test: unit and integration tests in the dev
# build, then the whole suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer, then the libFuzzer targets for a bounded time
# each (docs/testing.md). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

echo "== format check"
scripts/lint.sh --format-only

for preset in dev asan-ubsan; do
  echo "== ${preset}: configure and build"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "$(nproc)"
  echo "== ${preset}: test"
  ctest --preset "${preset}" -j 2
done
echo "== fuzz: configure, build and fuzz each target for BERTH_FUZZ_SECONDS (10 s)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
ctest --preset fuzz
echo "== all tests passed"
