#!/usr/bin/env bash
# What the herd effect costs (make bench-herd, or bench/herd.sh): lock cycles per
# second and the servers' requests and reads per grant with 5, 20 and 50 workers
# contending for one lock, zlc-mutex (each waiter watches its predecessor) against
# mutant-herd (every waiter watches the lock node's children), one run of TIME
# (default 20s) each, no faults, no final phase, 3 servers. The figures come from
# each run's results.json: steady_cycles_per_second and the herd record (package
# herd: the servers' mntr counters over the workload, divided by the grants).
# WORKERS="5 20 50" and RECIPES="zlc-mutex mutant-herd" choose the rows; ZLC_LOCK=FILE
# runs each run under flock FILE (a machine shared with other suites).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
time=${TIME:-20s}
echo "## The herd effect's cost ($(date -u +%F), one run of $time each, 3 servers, no faults)"
printf '| workers | recipe | verdict | lock cycles/s | reads per grant | requests per grant | waiters (mean, max) | herd |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for workers in ${WORKERS:-5 20 50}; do
  for recipe in ${RECIPES:-zlc-mutex mutant-herd}; do
    locked "$bin" run --quiet --allow-mutants --recipe "$recipe" --workers "$workers" --time "$time" --seed 1 \
      --final-phase=false --store "$store" >/dev/null 2>&1 || true
    python3 - "$store/latest/results.json" "$workers" "$recipe" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
h = r.get("herd") or {}
print(f'| {sys.argv[2]} | {sys.argv[3]} | {r["verdict"]} | {r.get("steady_cycles_per_second", 0):.1f} '
      f'| {h.get("reads_per_grant", 0):.1f} | {h.get("requests_per_grant", 0):.1f} '
      f'| {h.get("mean_waiters", 0):.1f}, {h.get("max_waiters", 0)} | {h.get("verdict", "-")} |')
PY
  done
done
