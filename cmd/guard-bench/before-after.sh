#!/usr/bin/env bash
# Before and after, interleaved in one run: the service as built from this
# tree and as built from an older commit (default a3e635a, the last one with
# the write-ahead log), both on bbolt, and this tree's service on a
# throwaway PostgreSQL (fsync and synchronous_commit on), all driven the
# same way. The machine is shared, so only figures from one run compare.
#
#   bash cmd/guard-bench/before-after.sh [duration] [rounds] [base-commit]
#   bash cmd/guard-bench/before-after.sh 5s 3 a3e635a
#   BASE_POSTGRES=1 bash cmd/guard-bench/before-after.sh 5s 3 a3e635a   # also the older build on PostgreSQL
#
# Per round and target: reserve-unique at 64 connections (rate, p50, p99,
# server CPU per reserve from /proc) and at 1 connection (p50, p99); and
# the no-op /healthz at 64 connections. Results: $OUT/results.jsonl, the
# CPU figures in $OUT/cpu.txt, and the table printed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
. cmd/guard-bench/lib.sh
DURATION=${1:-5s}
ROUNDS=${2:-3}
BASE=${3:-a3e635a}
OUT=${OUT:-$(mktemp -d /tmp/guard-before-after.XXXXXX)}
TOKEN=bench-$(date +%s)
BIN=$OUT/bin
mkdir -p "$BIN" "$OUT/base-src"
go build -o "$BIN/n8n-guard" ./cmd/n8n-guard
go build -o "$BIN/guard-bench" ./cmd/guard-bench
git archive "$BASE" | tar -x -C "$OUT/base-src"
(cd "$OUT/base-src" && go build -o "$BIN/n8n-guard-base" ./cmd/n8n-guard)



"$BIN/guard-bench" postgres >"$OUT/pg.out" 2>"$OUT/pg.err" & pids+=($!)
PGURL=$(wait_line "$OUT/pg.out" "url ")

declare -A url spid
start() { # label binary args...
  local l=$1; shift
  N8N_GUARD_TOKENS=$TOKEN "$@" --addr 127.0.0.1:0 --log-level info >"$OUT/$l.log" 2>&1 & pids+=($!); spid[$l]=$!
}
start after "$BIN/n8n-guard" serve --data "$OUT/data-after"
start before "$BIN/n8n-guard-base" serve --data "$OUT/data-before"
start postgres "$BIN/n8n-guard" serve --data "$OUT/data-pg" --store "$PGURL"
labels=(after before postgres)
# BASE_POSTGRES=1: the older build on PostgreSQL too, in a database of its
# own on the same throwaway server (before and after on PostgreSQL).
if [ -n "${BASE_POSTGRES:-}" ]; then
  psql "$PGURL" -qc 'CREATE DATABASE guard_before'
  start postgres-before "$BIN/n8n-guard-base" serve --data "$OUT/data-pg-before" --store "${PGURL/\/postgres\?//guard_before?}"
  labels+=(postgres-before)
fi
for l in "${labels[@]}"; do url[$l]=$(addr_of "$OUT/$l.log"); done

hz=$(getconf CLK_TCK)
echo "$(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/conditions.txt"
: >"$OUT/cpu.txt"
for round in $(seq 1 "$ROUNDS"); do
  "$BIN/guard-bench" --url "${url[after]}" --scenario healthz --concurrency 64 --duration "$DURATION" \
    --label "healthz r$round" --json >>"$OUT/results.jsonl"
  for l in "${labels[@]}"; do
    s0=$(cpu_ticks "${spid[$l]}")
    "$BIN/guard-bench" --url "${url[$l]}" --token "$TOKEN" --scenario reserve-unique --concurrency 64 \
      --duration "$DURATION" --warmup 0s --label "$l c64 r$round" --json >>"$OUT/results.jsonl"
    s1=$(cpu_ticks "${spid[$l]}")
    n=$(tail -1 "$OUT/results.jsonl" | grep -o '"requests":[0-9]*' | cut -d: -f2)
    echo "$l r$round server CPU per reserve: $(( (s1 - s0) * 1000000 / hz / (n + 1) )) µs" >>"$OUT/cpu.txt"
  done
  for l in "${labels[@]}"; do
    "$BIN/guard-bench" --url "${url[$l]}" --token "$TOKEN" --scenario reserve-unique --concurrency 1 \
      --duration "$DURATION" --label "$l c1 r$round" --json >>"$OUT/results.jsonl"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/conditions.txt"
printf '%-16s %10s %8s %8s\n' run "per s" "p50 ms" "p99 ms" | tee "$OUT/table.txt"
while read -r line; do
  l=$(echo "$line" | grep -o '"label":"[^"]*"' | cut -d'"' -f4)
  r=$(echo "$line" | grep -o '"requests_per_second":[0-9.]*' | cut -d: -f2)
  p50=$(echo "$line" | grep -o '"p50_ms":[0-9.]*' | cut -d: -f2)
  p99=$(echo "$line" | grep -o '"p99_ms":[0-9.]*' | cut -d: -f2)
  printf '%-16s %10.0f %8.2f %8.2f\n' "$l" "$r" "$p50" "$p99"
done <"$OUT/results.jsonl" | tee -a "$OUT/table.txt"
cat "$OUT/cpu.txt"
echo "results in $OUT"
