#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Berth needs to build, test and run.
# Idempotent: packages already present are skipped, so a second run costs a
# dpkg query and nothing else.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  clang-format clang-tidy-16
  # agent stream (gRPC + protobuf)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # state, formats, CLI, logging, HTTP
  libsqlite3-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev libcpp-httplib-dev libssl-dev
  # berthd's HTTP server (Asio + Beast, header-only); never the unversioned
  # libboost-*-dev packages beside it (1.74 conflicts)
  libboost1.81-dev
  # tenancy: token hashes (Argon2id)
  libargon2-dev
  # PostgreSQL: libpq for the store's PostgreSQL layer, and the server that
  # its tests start from initdb (tests/support/pg_server.h)
  libpq-dev postgresql-15
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # fuzzing (libFuzzer) and the metrics checks (prometheus, promtool)
  clang libclang-rt-14-dev clang-16 libclang-rt-16-dev prometheus
  # process tools used by the integration tests
  procps
  # the service gateway (src/gateway/): HAProxy, run and kept by berthd
  haproxy
  # container runs (image:): rootful podman with runc (deploy/podman/
  # containers.conf says why not crun), and busybox-static for the tests'
  # offline image (podman import of a busybox root filesystem)
  podman runc busybox-static
  # the web console's browser test (console/e2e/): headless Chromium driven
  # by playwright-core (--no-install-recommends, below, keeps it small)
  chromium
  # a font with Chinese glyphs, for the console's zh screenshots
  # (console/e2e/screenshots.mjs) and pages a person reads in headless Chromium
  fonts-wqy-microhei
)

# The web console (console/) is built with Node and npm, which come from
# nodejs.org or the distribution rather than this list (Debian 12's nodejs
# is 18, older than Vite needs).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-deps: node and npm are missing; the web console (console/) needs Node 20.19+ and" >&2
  echo "npm 10+ (https://nodejs.org). Install them, then run this again." >&2
  exit 1
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "${node_major}" -lt 20 ]; then
  echo "install-deps: node $(node --version) is too old for the web console; it needs 20.19+" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
