# Shared by the bench scripts (side-by-side.sh, before-after.sh): source it
# after `cd` to the repository. Processes started with `& pids+=($!)` are
# ended when the script exits.

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# wait_line FILE PREFIX: the rest of the first line of FILE that starts
# with PREFIX, once there is one.
wait_line() {
  for _ in $(seq 1 600); do
    if line=$(grep -m1 "^$2" "$1" 2>/dev/null); then echo "${line#"$2"}"; return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}

# addr_of LOG: the service's URL, from the addr= it logs when it listens.
addr_of() {
  for _ in $(seq 1 300); do
    a=$(grep -o 'addr=[0-9.:]*' "$1" | head -1 | cut -d= -f2 || true)
    [ -n "$a" ] && { echo "http://$a"; return 0; }
    sleep 0.1
  done
  echo "no address in $1" >&2; cat "$1" >&2; return 1
}

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
