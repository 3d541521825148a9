#!/usr/bin/env bash
# Side-by-side figures: the same load tool, the same concurrency, one run,
# against bbolt, PostgreSQL (synchronous_commit on) and the no-op /healthz.
#
#   bash cmd/guard-bench/side-by-side.sh [duration] [concurrency]
#   REPEAT=3 bash cmd/guard-bench/side-by-side.sh 10s 64   # 3 interleaved rounds, medians
#
# Targets (all on loopback, all started and stopped here):
#   n8n-guard  the real service on bbolt (n8n-guard serve --data)
#   bbolt      guard-bench serve: the real API (package api) on a bbolt file
#   postgres   guard-bench serve: the same API on a throwaway PostgreSQL
#              started by guard-bench postgres (fsync on, synchronous_commit on)
#   n8n-guard-pg  the real service on PostgreSQL, when its serve has --store
# Results: $OUT/results.jsonl and the table printed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
. cmd/guard-bench/lib.sh
DURATION=${1:-10s}
CONC=${2:-64}
OUT=${OUT:-$(mktemp -d /tmp/guard-bench.XXXXXX)}
TOKEN=bench-$(date +%s)
BIN=$OUT/bin
mkdir -p "$BIN"
go build -o "$BIN/n8n-guard" ./cmd/n8n-guard
go build -o "$BIN/guard-bench" ./cmd/guard-bench


wait_http() {
  for _ in $(seq 1 300); do curl -fs "$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "server $1 did not come up" >&2; return 1
}

"$BIN/guard-bench" postgres >"$OUT/pg.out" 2>"$OUT/pg.err" & pids+=($!)
PGURL=$(wait_line "$OUT/pg.out" "url ")

PGDIR=$(wait_line "$OUT/pg.err" "throwaway PostgreSQL in ")
PGDIR=${PGDIR%% *}
POSTMASTER=$(head -1 "$PGDIR/data/postmaster.pid")

pg_pids() { echo "$POSTMASTER" $(ps -o pid= --ppid "$POSTMASTER"); }

declare -A url spid
N8N_GUARD_TOKENS=$TOKEN "$BIN/n8n-guard" serve --addr 127.0.0.1:0 --data "$OUT/data" --log-level info \
  >"$OUT/n8n-guard.log" 2>&1 & pids+=($!); spid[n8n-guard]=$!
"$BIN/guard-bench" serve --addr 127.0.0.1:0 --store "$OUT/bolt.db" --token "$TOKEN" >"$OUT/bolt.out" 2>"$OUT/bolt.err" & pids+=($!); spid[bbolt]=$!
"$BIN/guard-bench" serve --addr 127.0.0.1:0 --store "$PGURL" --token "$TOKEN" >"$OUT/pgs.out" 2>"$OUT/pgs.err" & pids+=($!); spid[postgres]=$!
url[bbolt]=http://$(wait_line "$OUT/bolt.out" "listening ")
url[postgres]=http://$(wait_line "$OUT/pgs.out" "listening ")
# The service logs its address; take it from the log.
url[n8n-guard]=$(addr_of "$OUT/n8n-guard.log")
N8N_GUARD_TOKENS=$TOKEN "$BIN/n8n-guard" serve --addr 127.0.0.1:0 --data "$OUT/data-pg" --store "$PGURL" \
  --log-level info >"$OUT/n8n-guard-pg.log" 2>&1 & pids+=($!); spid[n8n-guard-pg]=$!
url[n8n-guard-pg]=$(addr_of "$OUT/n8n-guard-pg.log")
labels=(n8n-guard bbolt postgres n8n-guard-pg)
for l in "${labels[@]}"; do wait_http "${url[$l]}"; done

REPEAT=${REPEAT:-1}
echo "load: concurrency $CONC, $DURATION per run, $REPEAT round(s); machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/conditions.txt"
# CPU per request: the server process, and the PostgreSQL server processes
# (the postmaster and its backends), over the whole run including warm-up.
echo "cpu per request (µs; includes the warm-up second):" >"$OUT/cpu.txt"
for round in $(seq 1 "$REPEAT"); do
"$BIN/guard-bench" --url "${url[bbolt]}" --scenario healthz --concurrency "$CONC" --duration "$DURATION" \
  --label healthz --json >>"$OUT/results.jsonl"
for sc in reserve-unique duplicate-storm cycle; do
  for l in "${labels[@]}"; do
    s0=$(cpu_ticks "${spid[$l]}"); p0=$(cpu_ticks $(pg_pids))
    "$BIN/guard-bench" --url "${url[$l]}" --token "$TOKEN" --scenario "$sc" --concurrency "$CONC" \
      --duration "$DURATION" --label "$l" --json >>"$OUT/results.jsonl"
    s1=$(cpu_ticks "${spid[$l]}"); p1=$(cpu_ticks $(pg_pids))
    n=$(tail -1 "$OUT/results.jsonl" | grep -o '"requests":[0-9]*' | cut -d: -f2)
    hz=$(getconf CLK_TCK)
    printf '%-16s %-13s server %5d  postgres %5d\n' "$sc" "$l" \
      $(( (s1 - s0) * 1000000 / hz / (n + 1) )) $(( (p1 - p0) * 1000000 / hz / (n + 1) )) >>"$OUT/cpu.txt"
  done
done
done
echo "after: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/conditions.txt"
"$BIN/guard-bench" report --base bbolt "$OUT/results.jsonl" | tee "$OUT/table.txt"
cat "$OUT/cpu.txt"
echo "results in $OUT"
