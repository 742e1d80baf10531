#!/usr/bin/env bash
# Berth's module dependency rule (docs/architecture.md), checked on every
# build: a module under src/ may include only the modules listed for it.
# A forbidden include fails the build with the file, the line and the rule.
#
#   scripts/check-layers.sh [SRC_DIR]   check SRC_DIR (default: src/ beside this script)
#   scripts/check-layers.sh --self-test  show that a forbidden include is caught
set -euo pipefail

# module: the modules it may include ("berth" is the generated agent protocol).
declare -A ALLOWED=(
  [common]=""
  [model]="common"
  [sched]="common model"
  [store]="common model"
  [meter]="common model store"
  [control]="common model sched store meter berth proto_convert gateway"
  [sim]="common model sched control"
  [http]="common"
  [api]="common model sched control store sim meter http gateway"
  [proto_convert]="common model berth"
  [agent]="common model berth proto_convert"
  [server]="common model sched control store sim meter api http agent berth proto_convert gateway"
  [cli]="common model http"
  [modelserver]="common http"
  [gateway]="common"
)

check() {
  local src=$1 bad=0 file mod dep line
  while IFS=: read -r file line dep; do
    mod=${file#"$src"/}
    mod=${mod%%/*}
    [[ -v ALLOWED[$mod] ]] || continue
    [[ $dep == "$mod" ]] && continue
    [[ -v ALLOWED[$dep] || $dep == berth ]] || continue  # a system or third-party header
    if [[ " ${ALLOWED[$mod]} " != *" $dep "* ]]; then
      echo "$file:$line: module '$mod' may not include '$dep/' (it may include: ${ALLOWED[$mod]:-nothing}); see docs/architecture.md" >&2
      bad=1
    fi
  done < <(grep -rnoE '^#include "[a-z_]+/' "$src" --include='*.h' --include='*.cc' |
             sed -E 's/:#include "([a-z_]+)\/$/:\1/')
  return $bad
}

if [[ ${1:-} == --self-test ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/sched" "$tmp/src/store" "$tmp/src/meter"
  printf '#include "model/job.h"\n' > "$tmp/src/sched/ok.cc"
  check "$tmp/src" || { echo "self-test: an allowed include was refused" >&2; exit 1; }
  printf '#include "store/store.h"\n' > "$tmp/src/sched/bad.cc"
  printf '#include "api/api.h"\n' > "$tmp/src/store/bad.cc"
  printf '#include "control/controller.h"\n' > "$tmp/src/meter/bad.cc"
  out=$(check "$tmp/src" 2>&1) && { echo "self-test: forbidden includes passed" >&2; exit 1; }
  grep -q "sched/bad.cc:1: module 'sched' may not include 'store/'" <<<"$out" || { echo "$out" >&2; exit 1; }
  grep -q "store/bad.cc:1: module 'store' may not include 'api/'" <<<"$out" || { echo "$out" >&2; exit 1; }
  grep -q "meter/bad.cc:1: module 'meter' may not include 'control/'" <<<"$out" || { echo "$out" >&2; exit 1; }
  echo "self-test: forbidden includes are refused"
  exit 0
fi

src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}
check "$src"
