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

echo "== console: build and unit tests (vitest)"
(cd console && npm ci --no-audit --no-fund --loglevel=error && npm test --silent)

for preset in dev asan-ubsan; do
  echo "== ${preset}: configure and build"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "$(nproc)"
  # The console beside berthd, for its browser test (console_browser_test).
  scripts/build-console.sh "build/${preset}/bin"
  echo "== ${preset}: test"
  ctest --preset "${preset}" -j 2
done
echo "== fuzz: configure, build and fuzz each target for BERTH_FUZZ_SECONDS (10 s)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
ctest --preset fuzz
echo "== all tests passed"
