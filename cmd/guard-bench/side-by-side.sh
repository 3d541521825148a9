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
DURATION=${1:-10s}
CONC=${2:-64}
OUT=${OUT:-$(mktemp -d /tmp/guard-bench.XXXXXX)}
TOKEN=bench-$(date +%s)
BIN=$OUT/bin
mkdir -p "$BIN"
go build -o "$BIN/n8n-guard" ./cmd/n8n-guard
go build -o "$BIN/guard-bench" ./cmd/guard-bench

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# wait_line FILE PREFIX: the first line of FILE that starts with PREFIX.
wait_line() {
  for _ in $(seq 1 600); do
    if line=$(grep -m1 "^$2" "$1" 2>/dev/null); then echo "${line#"$2"}"; return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}
wait_http() {
  for _ in $(seq 1 300); do curl -fs "$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "server $1 did not come up" >&2; return 1
}

"$BIN/guard-bench" postgres >"$OUT/pg.out" 2>"$OUT/pg.err" & pids+=($!)
PGURL=$(wait_line "$OUT/pg.out" "url ")

PGDIR=$(wait_line "$OUT/pg.err" "throwaway PostgreSQL in ")
PGDIR=${PGDIR%% *}
POSTMASTER=$(head -1 "$PGDIR/data/postmaster.pid")

# cpu_ticks PID...: user+system CPU of the processes, in clock ticks.
cpu_ticks() {
  local t=0 p f
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    read -r -a f <"/proc/$p/stat"
    t=$((t + f[13] + f[14]))
  done
  echo "$t"
}
pg_pids() { echo "$POSTMASTER" $(ps -o pid= --ppid "$POSTMASTER"); }

declare -A url spid
N8N_GUARD_TOKENS=$TOKEN "$BIN/n8n-guard" serve --addr 127.0.0.1:0 --data "$OUT/data" --log-level info \
  >"$OUT/n8n-guard.log" 2>&1 & pids+=($!); spid[n8n-guard]=$!
"$BIN/guard-bench" serve --addr 127.0.0.1:0 --store "$OUT/bolt.db" --token "$TOKEN" >"$OUT/bolt.out" 2>"$OUT/bolt.err" & pids+=($!); spid[bbolt]=$!
"$BIN/guard-bench" serve --addr 127.0.0.1:0 --store "$PGURL" --token "$TOKEN" >"$OUT/pgs.out" 2>"$OUT/pgs.err" & pids+=($!); spid[postgres]=$!
url[bbolt]=http://$(wait_line "$OUT/bolt.out" "listening ")
url[postgres]=http://$(wait_line "$OUT/pgs.out" "listening ")
# The service logs its address; take it from the log.
for _ in $(seq 1 100); do
  a=$(grep -o 'addr=[0-9.:]*' "$OUT/n8n-guard.log" | head -1 | cut -d= -f2 || true)
  [ -n "$a" ] && break; sleep 0.1
done
labels=(bbolt postgres)
if [ -n "${a:-}" ]; then url[n8n-guard]=http://$a; labels=(n8n-guard "${labels[@]}"); fi
if "$BIN/n8n-guard" serve --help 2>&1 | grep -q -- '--store'; then
  N8N_GUARD_TOKENS=$TOKEN "$BIN/n8n-guard" serve --addr 127.0.0.1:0 --data "$OUT/data-pg" --store "$PGURL" \
    --log-level info >"$OUT/n8n-guard-pg.log" 2>&1 & pids+=($!); spid[n8n-guard-pg]=$!
  for _ in $(seq 1 100); do
    b=$(grep -o 'addr=[0-9.:]*' "$OUT/n8n-guard-pg.log" | head -1 | cut -d= -f2 || true)
    [ -n "$b" ] && break; sleep 0.1
  done
  [ -n "${b:-}" ] && { url[n8n-guard-pg]=http://$b; labels+=(n8n-guard-pg); }
fi
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
