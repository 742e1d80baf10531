#!/usr/bin/env bash
# Records a day of cluster activity on a fresh all-in-one berthd and writes
# the operations report of it (docs/examples/ops-report/README.md):
#
#   scripts/record-ops-day.sh [--bin DIR] [--out DIR] [--factor N] [--hours H]
#
#   --bin DIR     where berthd and berth are (default: build/release/bin,
#                 built with the release preset when missing)
#   --out DIR     where report.md, report.html and report.json go
#                 (default: docs/examples/ops-report)
#   --factor N    time compression: N trace seconds per real second (default
#                 120: 24 h of trace in 12 minutes)
#   --hours H     hours of trace to play (default 24)
#
# A simulated cluster of 4 nodes x 8 GPUs (two H100-80GB nodes in pool
# `training`, two L40S-48GB nodes in pool `inference`), a policy with three
# tenants, prices and a budget; then the first H hours of the Microsoft ITP
# trace (cluster02: submissions, durations and GPU counts, divided by the
# factor), mapped onto the tenants, with a few failing jobs; and, at fixed
# points of the day, an admin's cordon, drain and uncordon, a high-priority
# job that preempts a low-priority one, an admin cancelling a tenant's job and a policy change.
# The data dir is a temp dir, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=""
out_dir="docs/examples/ops-report"
factor=120
hours=24
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin_dir="$2"; shift 2 ;;
    --out) out_dir="$2"; shift 2 ;;
    --factor) factor="$2"; shift 2 ;;
    --hours) hours="$2"; shift 2 ;;
    *) echo "record-ops-day: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
if ! [[ "$factor" =~ ^[0-9]+$ && "$factor" -ge 1 ]]; then
  echo "record-ops-day: --factor must be a whole number >= 1, e.g. 120" >&2; exit 2
fi
if ! [[ "$hours" =~ ^[0-9]+$ && "$hours" -ge 1 ]]; then
  echo "record-ops-day: --hours must be a whole number >= 1, e.g. 24" >&2; exit 2
fi
trace=/work/shared/traces/msft-itp-2021/cluster02.csv
[[ -r "$trace" ]] || trace="${BERTH_TRACE:-}"
if [[ -z "$trace" || ! -r "$trace" ]]; then
  echo "record-ops-day: no trace: set BERTH_TRACE to an ITP cluster CSV" >&2; exit 2
fi
if [[ -z "$bin_dir" ]]; then
  bin_dir=build/release/bin
  if [[ ! -x "$bin_dir/berthd" ]]; then
    cmake --preset release >/dev/null
    cmake --build --preset release -j "$(nproc)" --target berthd berth berth-shim berth-agent
  fi
fi
berthd="$bin_dir/berthd"
berth="$bin_dir/berth"
for b in "$berthd" "$berth"; do
  [[ -x "$b" ]] || { echo "record-ops-day: $b not found (give --bin DIR)" >&2; exit 2; }
done
mkdir -p "$out_dir"

work="$(mktemp -d "${TMPDIR:-/tmp}/berth-opsday-XXXXXX")"
berthd_pid=""
cleanup() {
  if [[ -n "$berthd_pid" ]]; then
    kill "$berthd_pid" 2>/dev/null || true
    wait "$berthd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
now_ms() { date +%s%3N; }
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

cat >"$work/cluster.yaml" <<'EOF'
nodes:
  - name: train-a
    labels: {pool: training}
    cpus: 64
    memory: 512Gi
    gpus: {model: H100-80GB, memory: 80Gi, count: 8}
  - name: train-b
    labels: {pool: training}
    cpus: 64
    memory: 512Gi
    gpus: {model: H100-80GB, memory: 80Gi, count: 8}
  - name: infer-a
    labels: {pool: inference}
    cpus: 32
    memory: 256Gi
    gpus: {model: L40S-48GB, memory: 48Gi, count: 8}
  - name: infer-b
    labels: {pool: inference}
    cpus: 32
    memory: 256Gi
    gpus: {model: L40S-48GB, memory: 48Gi, count: 8}
EOF

api_port="$(free_port)"
agent_port="$(free_port)"
export BERTH_SERVER="http://127.0.0.1:$api_port"
"$berthd" --all-in-one --simulate "$work/cluster.yaml" --data-dir "$work/data" \
  --listen "127.0.0.1:$api_port" --agent-listen "127.0.0.1:$agent_port" \
  --plain-http --plain-agents --gateway-listen off --stop-grace 2s --telemetry-interval 1s --idle-window 1m \
  --log-level warn >"$work/berthd.log" 2>&1 &
berthd_pid=$!
for _ in $(seq 1 100); do
  curl -fs "$BERTH_SERVER/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "$BERTH_SERVER/healthz" >/dev/null || { cat "$work/berthd.log" >&2; exit 1; }
BERTH_TOKEN="$(cat "$work/data/bootstrap-token")"
export BERTH_TOKEN
admin_token="$BERTH_TOKEN"
for _ in $(seq 1 100); do
  [[ "$("$berth" nodes -o json | jq '[.nodes[] | select(.state == "Ready")] | length')" == 4 ]] && break
  sleep 0.2
done
log "berthd up on $BERTH_SERVER with 4 nodes (data in $work/data)"

from_ms="$(now_ms)"

# --- the platform: three tenants, prices, a budget ---
cat >"$work/policy.yaml" <<'EOF'
# Three tenants sharing two pools.
pools:
  - {name: training, selector: {pool: training}}
  - {name: inference, selector: {pool: inference}}
queues:
  - name: default
    children:
      - name: default
  - name: vision
    quota:
      gpus: {guaranteed: 12}
    children:
      - name: train
  - name: nlp
    quota:
      gpus: {guaranteed: 12}
    children:
      - name: train
  - name: speech
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: train
EOF
"$berth" policy apply "$work/policy.yaml" --comment "three tenants" >/dev/null
cat >"$work/prices.yaml" <<'EOF'
currency: USD
default: 1.00
prices:
  - {model: H100-80GB, per_gpu_hour: 3.20}
  - {model: L40S-48GB, per_gpu_hour: 1.10}
EOF
"$berth" price apply "$work/prices.yaml" --comment "list prices" >/dev/null
"$berth" budget set nlp --amount 900 --alert 50,80,100 >/dev/null

# A member identity per tenant submits its tenant's jobs (so an admin's
# cancel is someone else's job).
declare -A tokens
for t in vision nlp speech; do
  curl -fs -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
    -d "{\"name\": \"$t-bot\", \"kind\": \"service\", \"tenants\": {\"$t\": \"member\"}}" \
    "$BERTH_SERVER/v1/identities" >/dev/null
  tokens[$t]="$(curl -fs -H "Authorization: Bearer $admin_token" \
    -H 'Content-Type: application/json' -d "{\"identity\": \"$t-bot\", \"ttl\": \"2d\"}" \
    "$BERTH_SERVER/v1/tokens" | jq -r .token)"
done

# --- the day's schedule: trace jobs plus admin events, in trace seconds ---
# Trace jobs: the first $hours hours after the first submission. Tenant by
# the job id's first hex digit (0-6 vision, 7-b nlp, c-f speech); every 17th
# job fails (exit 1), every 41st with a CUDA out-of-memory message.
day_s=$((hours * 3600))
awk -F, -v day="$day_s" 'NR == 1 { next }
  NR == 2 { t0 = $2 }
  $2 - t0 >= day { exit }
  {
    d = substr($1, 1, 1); n++
    tenant = (d ~ /[0-6]/) ? "vision" : (d ~ /[7-9ab]/) ? "nlp" : "speech"
    kind = (n % 41 == 0) ? "oom" : (n % 17 == 0) ? "fail" : "ok"
    printf "%d job %s %d %d %s\n", $2 - t0, tenant, $4, $3, kind
  }' "$trace" >"$work/schedule"
jobs_in_trace="$(wc -l <"$work/schedule")"
{
  echo "$((day_s * 25 / 100)) cordon train-b"
  echo "$((day_s * 30 / 100)) drain infer-b"
  echo "$((day_s * 42 / 100)) uncordon train-b"
  echo "$((day_s * 45 / 100)) uncordon infer-b"
  echo "$((day_s * 44 / 100)) fill"
  echo "$((day_s * 50 / 100)) preempt"
  echo "$((day_s * 60 / 100)) cancel"
  echo "$((day_s * 70 / 100)) policy"
} >>"$work/schedule"
sort -n -s -k1,1 "$work/schedule" -o "$work/schedule"
log "playing ${hours} h of $(basename "$trace") ($jobs_in_trace jobs) at ${factor}x: about $((day_s / factor)) s"

# How each job loads its simulated GPUs (the spec's load: block, which the
# simulated provider follows): vision trains flat out, nlp stalls on input
# half of every 20 s, speech is light; every 13th job is an allocation
# nobody uses (a notebook left open), which the report counts as idle.
submitted=0
load_of() {  # tenant; sets job_load (no subshell, so the count holds)
  submitted=$((submitted + 1))
  if (( submitted % 13 == 0 )); then
    job_load='{"pattern": "idle", "memory": "5%"}'; return
  fi
  case "$1" in
    vision) job_load='{"utilization": 88, "memory": "70%"}' ;;
    nlp) job_load='{"pattern": "periodic", "utilization": 95, "idle_utilization": 30, "period": "20s", "memory": "85%"}' ;;
    *) job_load='{"utilization": 55, "memory": "35%"}' ;;
  esac
}

submit() {  # tenant gpus duration_s kind [priority] [pool]
  local tenant="$1" gpus="$2" dur="$3" kind="$4" prio="${5:-normal}" pool="${6:-}"
  load_of "$tenant"
  local script="sleep $dur"
  [[ "$kind" == fail ]] && script="sleep $dur; echo 'loss is NaN' >&2; exit 1"
  [[ "$kind" == oom ]] && script="sleep $dur; echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1"
  local spec
  spec="$(jq -n --arg t "$tenant" --arg s "$script" --arg p "$prio" --arg pool "$pool" \
    --argjson g "$gpus" --arg n "$tenant-$kind-$RANDOM" --argjson load "$job_load" \
    '{name: $n, tenant: $t, queue: "train", command: ["sh", "-c", $s], priority: $p,
      resources: {gpus: $g}, load: $load} + (if $pool == "" then {} else {pool: $pool} end)
      + (if $p == "high" then {preemptible: true} else {} end)')"
  local token="${tokens[$tenant]}"
  [[ "$prio" == high ]] && token="$admin_token"
  curl -fs -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "$spec" "$BERTH_SERVER/v1/jobs" >/dev/null || log "submit refused: $spec"
}

start_s="$(date +%s.%N)"
while read -r at what a b c d; do
  # Sleep until this entry's compressed time.
  target="$(awk -v s="$start_s" -v at="$at" -v f="$factor" 'BEGIN { printf "%.3f", s + at / f }')"
  wait_s="$(awk -v t="$target" -v now="$(date +%s.%N)" 'BEGIN { w = t - now; printf "%.3f", (w > 0 ? w : 0) }')"
  sleep "$wait_s"
  case "$what" in
    job)
      dur=$(( c / factor )); (( dur < 1 )) && dur=1
      submit "$a" "$b" "$dur" "$d" ;;
    cordon|drain|uncordon)
      log "admin: $what $a"
      if [[ "$what" == uncordon ]]; then
        "$berth" uncordon "$a" >/dev/null
      else
        "$berth" "$what" "$a" --reason "scheduled maintenance" >/dev/null
      fi ;;
    fill)
      log "vision: two long low-priority 8-GPU jobs in pool training"
      for _ in 1 2; do submit vision 8 $((day_s / factor)) ok low training; done ;;
    preempt)
      log "admin: a high-priority 8-GPU vision job in pool training (preempts)"
      submit vision 8 60 ok high training ;;
    cancel)
      victim="$("$berth" jobs --state Running --tenant speech -o json | jq -r '.jobs[0].id // empty')"
      if [[ -n "$victim" ]]; then
        log "admin: cancel speech job $victim"
        "$berth" cancel "$victim" >/dev/null
      fi ;;
    policy)
      log "admin: policy change (nlp guarantee 12 -> 16, speech 8 -> 4)"
      sed -e '/name: nlp/,/name: speech/ s/guaranteed: 12/guaranteed: 16/' \
          -e '/name: speech/,$ s/guaranteed: 8/guaranteed: 4/' "$work/policy.yaml" >"$work/policy2.yaml"
      "$berth" policy apply "$work/policy2.yaml" --comment "nlp deadline week" >/dev/null ;;
  esac
done <"$work/schedule"

to_ms="$(now_ms)"
log "recorded window: $from_ms to $to_ms"
for f in markdown:md html:html json:json; do
  "$berth" report ops --from "$from_ms" --to "$to_ms" -o "${f%%:*}" --out "$out_dir/report.${f##*:}" >/dev/null
done
jq -r '"jobs started: \(.total.wait.started), runs finished: \(.total.runs_finished), failed: \(.total.runs_failed), evictions: \(.evictions | length), interventions: \(.interventions | length)"' "$out_dir/report.json"
log "wrote $out_dir/report.md, report.html, report.json"
