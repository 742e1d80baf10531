#!/usr/bin/env bash
# Builds Berth and starts the all-in-one platform: berthd with an embedded
# agent for this host (NVML GPUs where there are any, else a simulated node
# with eight 80 GB GPUs) and state in ./.berth unless BERTH_DATA_DIR is set.
# Extra arguments go to berthd, e.g. --simulate deploy/examples/cluster.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target berthd berth berth-shim berth-agent berth-model-server
# The web console, beside berthd (served at /ui/).
scripts/build-console.sh build/release/bin

data_dir="${BERTH_DATA_DIR:-$PWD/.berth}"
# berthd creates its CA and server certificate under ${data_dir}/tls at the
# first start; berth trusts it through --ca or BERTH_CA.
echo "berthd: API on https://127.0.0.1:7460, state in ${data_dir}"
echo "console: https://127.0.0.1:7460/ui/ (sign in with a token, e.g. the admin's below)"
echo "CA:     ${data_dir}/tls/ca.pem (created at first start)"
echo "admin:  ${data_dir}/bootstrap-token (created at first start, readable by you only)"
echo "try:    build/release/bin/berth login --ca ${data_dir}/tls/ca.pem --token-file ${data_dir}/bootstrap-token"
exec build/release/bin/berthd --all-in-one --data-dir "${data_dir}" "$@"
