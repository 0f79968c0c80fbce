#!/usr/bin/env bash
# CPU per lock cycle by role, the harness against a plain loop of processes, at
# --hold-max 1ms (issue 15): where a cycle's CPU goes, which cycles per second alone
# does not say. Both spread between identical runs on a noisy 2-core machine (the
# ratio by up to 0.08, ZooKeeper's ms per cycle by ~15%: BENCHMARKS.md, "fifth look"),
# so compare alternated runs, several of each.
#
#   bash bench/cpucycle.sh [WORKERS...]     (default: 5 20; root, ZooKeeper: make setup)
#
# Each run is `zlockcheck run --baseline-processes`: the workload, then on the same
# ensemble the plain go-zookeeper loop as one process per worker slot. bench/cpushare.py
# samples every role's CPU each second beside it; a second counts for the workload
# when the workers were busy, for the plain loop when its processes were. Printed:
# ms of CPU per cycle of ZooKeeper, the harness, the workers (workload) and the plain
# loop's processes, from the busy seconds' CPU over the cycles the phase completed in
# them (its cycles/s times those seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
echo "| workers | phase | cycles/s | ZooKeeper ms/cycle | harness ms/cycle | client processes ms/cycle |"
echo "|---|---|---|---|---|---|"
for workers in ${@:-5 20}; do
  python3 bench/cpushare.py 1 > "$store/cpu.log" &
  share=$!
  "$bin" run --quiet --time "${BENCH_TIME:-20s}" --workers "$workers" --seed 1 --baseline-processes \
    --final-phase=false --hold-max 1ms --store "$store" >/dev/null || true
  kill "$share"
  python3 - "$store/latest/results.json" "$store/cpu.log" "$workers" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = [l.split() for l in open(sys.argv[2]).read().splitlines()[1:] if l.strip()]
col = {n: i for i, n in enumerate("t zk harness workers plain-loop other".split())}
def phase(busy_role, cps, name, client):
    secs = [row for row in rows if float(row[col[busy_role]]) > 0.05]
    # The first and last busy seconds are partly set-up and teardown: drop them.
    secs = secs[1:-1]
    if not secs or cps <= 0:
        print(f"| {sys.argv[3]} | {name} | - | - | - | - |"); return
    cycles = cps * len(secs)
    ms = lambda role: sum(float(row[col[role]]) for row in secs) * 1000 / cycles
    print(f"| {sys.argv[3]} | {name} | {cps:.1f} | {ms('zk'):.2f} | {ms('harness'):.2f} | {ms(client):.2f} |")
phase("workers", r["steady_cycles_per_second"], "harness", "workers")
b = r["baseline_processes"]
phase("plain-loop", b["cycles"] / (b["duration_ns"] / 1e9), "plain loop, processes", "plain-loop")
PY
done
