#!/usr/bin/env bash
# Ensemble tuning (make bench-tuning): what limits lock cycles per second on this
# machine. Each variant is one `zlockcheck run` of gozk, 5 workers, holds of at most
# 1 ms (so the lock is bound by ZooKeeper, not by the hold), no faults, TIME (default
# 20s) long; the variants alternate (A B C ... A B C ...) REPS times (default 2). For
# each: the steady-state cycles per second (results.json), and the CPU the harness,
# servers and workers used together per second of wall time (GNU time's user+sys over
# elapsed: 2.00 means both cores busy). Then the fsync latency of the store's disk.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
time=${TIME:-20s}
reps=${REPS:-2}
# label | extra arguments
variants=(
  "default (forceSync=yes, heap 256m, C1 only, tick 200ms)|"
  "--no-force-sync (a weaker durability model)|--no-force-sync"
  "--server-full-jit (C1 and C2)|--server-full-jit"
  "--server-heap 1g|--server-heap 1g"
  "--tick 1s|--tick 1s"
  "--nodes 5|--nodes 5"
)
echo "## Ensemble tuning ($(date -u +%F), $(nproc) cores, gozk, 5 workers, --hold-max 1ms, $time per run)"
echo
printf '| rep | variant | cycles/s (steady) | CPU per wall second |\n|---|---|---|---|\n'
for rep in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do
    IFS='|' read -r label args <<< "$v"
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S %e' -o "$store/time" "$bin" run --quiet --time "$time" --workers 5 --hold-max 1ms \
      --seed "$rep" --final-phase=false --store "$store" $args >/dev/null
    python3 - "$store/latest/results.json" "$store/time" "$rep" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
user, sys_, wall = map(float, open(sys.argv[2]).read().split()[-3:])
print(f"| {sys.argv[3]} | {sys.argv[4]} | {r['steady_cycles_per_second']:.1f} | {(user + sys_) / wall:.2f} |")
PY
  done
done
echo
python3 - "$store" <<'PY'
import os, sys, time
path = os.path.join(sys.argv[1], "fsync-probe")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
lat = []
for i in range(200):
    os.write(fd, b"x" * 512)
    t = time.perf_counter()
    os.fsync(fd)
    lat.append(time.perf_counter() - t)
os.close(fd)
lat.sort()
print(f"fsync of a 512-byte append on the store's disk: median {lat[100]*1e3:.2f} ms, p90 {lat[180]*1e3:.2f} ms (200 samples)")
PY
