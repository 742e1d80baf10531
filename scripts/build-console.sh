#!/usr/bin/env bash
# Builds the web console (console/: npm ci from the committed lockfile, then
# vite build) and puts it where berthd looks by default: <bin>/ui beside
# the berthd binary. Usage: scripts/build-console.sh BIN_DIR [BIN_DIR...]
# `npm ci` runs only when console/node_modules is older than the lockfile.
set -euo pipefail
# The destinations as the caller named them, before leaving its directory.
bins=()
for bin in "$@"; do bins+=("$(realpath -m "${bin}")"); done
cd "$(dirname "$0")/../console"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "build-console: node and npm are needed to build the web console (Node 20.19+," >&2
  echo "npm 10+; Debian: apt-get install nodejs npm, or nodejs.org). berthd runs without" >&2
  echo "it and answers /ui/ with a 404 saying how to build it." >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build
for bin in "${bins[@]}"; do
  mkdir -p "${bin}"
  rm -rf "${bin}/ui.new"
  cp -r dist "${bin}/ui.new"
  rm -rf "${bin}/ui"
  mv "${bin}/ui.new" "${bin}/ui"
  echo "build-console: the console is in ${bin}/ui"
done
