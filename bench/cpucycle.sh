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
# them (its cycles/s times those seconds). Beside that, bench/zkcounters.py samples the
# servers' request counters (mntr) every 4 s: ZooKeeper's writes per second in each
# phase (two per cycle: a create and a delete) and client requests per write, the same
# in both phases when both ask ZooKeeper for the same work per cycle. And
# bench/ctxswitch.py counts context switches: per cycle, ZooKeeper's / the harness's /
# the client processes', over the same busy seconds as the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
echo "| workers | phase | cycles/s | ZooKeeper ms/cycle | harness ms/cycle | client processes ms/cycle | ZooKeeper writes/s | requests per write | switches per cycle (ZooKeeper / harness / clients) |"
echo "|---|---|---|---|---|---|---|---|---|"
for workers in ${@:-5 20}; do
  python3 bench/cpushare.py 1 > "$store/cpu.log" &
  share=$!
  python3 bench/zkcounters.py 4 > "$store/zk.log" &
  counters=$!
  python3 bench/ctxswitch.py 1 > "$store/ctx.log" &
  switches=$!
  "$bin" run --quiet --time "${BENCH_TIME:-20s}" --workers "$workers" --seed 1 --baseline-processes \
    --final-phase=false --hold-max 1ms --store "$store" >/dev/null || true
  kill "$share" "$counters" "$switches"
  python3 - "$store/latest/results.json" "$store/cpu.log" "$workers" "$store/zk.log" "$store/ctx.log" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = [l.split() for l in open(sys.argv[2]).read().splitlines()[1:] if l.strip()]
col = {n: i for i, n in enumerate("t zk harness workers plain-loop other".split())}
ctx = [l.split() for l in open(sys.argv[5]).read().splitlines()[1:] if l.strip()]
zk = [l.split() for l in open(sys.argv[4]).read().splitlines()[1:] if l.strip()]
def counters(tag):
    # The phase's samples but its first (set-up): writes/s and requests per write.
    s = [row for row in zk if row[1] == tag][1:]
    if len(s) < 2 or int(s[-1][3]) == int(s[0][3]):
        return "- | -"
    writes = int(s[-1][3]) - int(s[0][3])
    requests = int(s[-1][2]) - int(s[0][2])
    return f"{writes / (float(s[-1][0]) - float(s[0][0])):.0f} | {requests / writes:.2f}"
def phase(busy_role, cps, name, client, tag):
    secs = [row for row in rows if float(row[col[busy_role]]) > 0.05]
    # The first and last busy seconds are partly set-up and teardown: drop them.
    secs = secs[1:-1]
    if not secs or cps <= 0:
        print(f"| {sys.argv[3]} | {name} | - | - | - | - | - | - | - |"); return
    cycles = cps * len(secs)
    ms = lambda role: sum(float(row[col[role]]) for row in secs) * 1000 / cycles
    # Switches over the client role's busy intervals but the first and last, per cycle
    # at the phase's rate (the sampler's intervals run a little over a second).
    # ctxswitch.py has two columns (voluntary, involuntary) per role, in cpushare's order.
    def sw(role, busy=client):
        j = 2 * col[busy] - 1
        idx = [i for i, c in enumerate(ctx) if int(c[j]) + int(c[j + 1]) > 100][1:-1]
        if not idx or idx[0] == 0:
            return "-"
        k = 2 * col[role] - 1
        n = sum(int(ctx[i][k]) + int(ctx[i][k + 1]) for i in idx)
        return f"{n / (cps * (float(ctx[idx[-1]][0]) - float(ctx[idx[0] - 1][0]))):.0f}"
    print(f"| {sys.argv[3]} | {name} | {cps:.1f} | {ms('zk'):.2f} | {ms('harness'):.2f} | {ms(client):.2f} | {counters(tag)} | {sw('zk')} / {sw('harness')} / {sw(client)} |")
phase("workers", r["steady_cycles_per_second"], "harness", "workers", "W")
b = r["baseline_processes"]
phase("plain-loop", b["cycles"] / (b["duration_ns"] / 1e9), "plain loop, processes", "plain-loop", "P")
PY
done
