#!/usr/bin/env bash
# Time to detect (make bench-detect): for every mutant of zlc-mutex under the run that
# exposes it, and under other aims of the same faults, SEEDS (default 5) runs of TIME
# (default 30s); prints the median and the worst time from the start of the run to
# the first violation (the liveness verdict's time for the deadlocking mutants), and
# how many seeds caught it; then the same for one default command, explore with a
# budget (BUDGET, default 5m), and, side by side with it on the same mutants and seeds,
# a random baseline as Jepsen runs one (a fixed workload, every fault class of the
# service at random: `run --nemesis all`, ROUND-long runs, default 20s, seed after
# seed, until the first violation or the same budget), with the ratio of the medians.
# ONLY=hand or ONLY=explore (explore and the baseline) runs one of the two parts.
# Explore and the baseline count only a violation by more than an honest cause (a
# recipe bug, a liveness failure): an honest overlap (unfenced, configuration, server
# lost the lock, clock) is the service's truth, not the mutant's bug.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
seeds=${SEEDS:-5}
time=${TIME:-30s}
# mutant | label | arguments
cases=(
  "mutant-off-by-one|no faults, --think-max 100ms|--think-max 100ms"
  "mutant-no-recheck|no faults, --acquire-timeout 150ms|--acquire-timeout 150ms"
  "mutant-delete-lowest|no faults, --acquire-timeout 150ms|--acquire-timeout 150ms"
  "mutant-ignore-lost|client-partition aimed at the holder|--nemesis client-partition --nemesis-targets holder --nemesis-interval 2s --hold-max 10s --session-timeout 2s --acquire-timeout 20s"
  "mutant-ignore-lost|client-partition at random|--nemesis client-partition --nemesis-targets random --nemesis-interval 2s --hold-max 10s --session-timeout 2s --acquire-timeout 20s"
  "mutant-unprotected-create|reply-loss aimed at idle workers|--nemesis reply-loss --nemesis-targets idle --nemesis-interval 2s --think-max 200ms --acquire-timeout 10s"
  "mutant-unprotected-create|reply-loss at random|--nemesis reply-loss --nemesis-targets random --nemesis-interval 2s --think-max 200ms --acquire-timeout 10s"
  "mutant-missed-wakeup|no faults, 2 workers, holds under 1ms|--workers 2 --hold-max 1ms --think-max 2ms --acquire-timeout 3s"
  "mutant-withdrawn-watch|no faults, acquires giving up after a hold|--workers 3 --hold-max 5ms --think-max 2ms --acquire-timeout 10ms"
  "mutant-swallowed-release|connection-reset aimed at the holder|--nemesis connection-reset --nemesis-targets holder --nemesis-interval 2s --hold-max 100ms --think-max 100ms --acquire-timeout 10s"
)
only=${ONLY:-both}
if [ "$only" != explore ]; then
echo "## Time to detect ($(date -u +%F), $seeds seeds of $time each)"
printf '| mutant | faults | caught | median (s) | worst (s) |\n|---|---|---|---|---|\n'
for c in "${cases[@]}"; do
  IFS='|' read -r mutant label args <<< "$c"
  times=()
  for seed in $(seq 1 "$seeds"); do
    # shellcheck disable=SC2086
    locked "$bin" run --quiet --allow-mutants --recipe "$mutant" --time "$time" --seed "$seed" --store "$store" $args >/dev/null || true
    t=$(python3 - "$store/latest/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ts = [c["first_violation_seconds"] for c in r["checks"] if c["verdict"] == "invalid" and "first_violation_seconds" in c]
print(min(ts) if ts else "-")
PY
)
    times+=("$t")
  done
  python3 - "$mutant" "$label" "${times[@]}" <<'PY'
import sys, statistics
mutant, label, ts = sys.argv[1], sys.argv[2], sys.argv[3:]
caught = sorted(float(t) for t in ts if t != "-")
med = f"{statistics.median(caught):.1f}" if caught else "-"
worst = f"{max(caught):.1f}" if len(caught) == len(ts) else "not caught in every seed"
print(f"| {mutant} | {label} | {len(caught)}/{len(ts)} | {med} | {worst} |")
PY
done
fi

[ "$only" = hand ] && exit 0
# The default command: one explore command line for every mutant (only --recipe
# differs), its time to detect the whole session's wall time until it stopped at the
# first violation (set-up, rounds and checks included). EXPLORE_ARGS are the nightly
# command's other flags (unset: the sync window closed, as examples/nightly.yaml; empty for Redis and the databases, which refuse it);
# MUTANTS the mutants to run (default: every mutant of zlc-mutex).
budget=${BUDGET:-5m}
explore_args=${EXPLORE_ARGS---sync-limit 10}
mutants=${MUTANTS:-$("$bin" recipes --allow-mutants | awk '/^mutant-/ && !/^mutant-(herd|redis|redlock|pg-|mariadb)/ {print $1}')}
round=${ROUND:-20s}
# The baseline's fault classes: every class of the service ("all" is ZooKeeper's; give
# Redis's or a database's own list, e.g. kill,pause,packet,client-pause,
# client-partition,client-kill,connection-kill,restart,clock-jump,connection-reset for
# one Redis; partition too for three instances: a run of one server refuses it).
baseline_nemesis=${BASELINE_NEMESIS:-all}
budget_s=$(python3 -c "import sys; v=sys.argv[1]; print(int(v[:-1])*{'s':1,'m':60,'h':3600}[v[-1]])" "$budget")
# baseline_lanes is how many baseline runs go at once (BASELINE_LANES, default 1, as
# Jepsen runs one cluster): explore's lanes run rounds on as many ensembles at once
# (Redis 4, the databases 3), so BASELINE_LANES=4 gives the baseline the same servers.
baseline_lanes=${BASELINE_LANES:-1}
# caught reports whether the run whose results.json is $1 is invalid by more than an
# honest cause (a recipe bug, or a liveness failure, which has no class), as
# explore's session stops only at such a round.
caught() {
  python3 - "$1" <<'PY'
import json, sys
honest = {"unfenced overlap", "configuration", "server lost the lock", "clock"}
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(1)
sys.exit(0 if any(c["verdict"] == "invalid" and (c.get("cause") or {}).get("class") not in honest for c in r["checks"]) else 1)
PY
}
# baseline prints the wall time of steps of $baseline_lanes `run --nemesis all` runs at
# once, each of $round, seeds seed*1000+1, +2, ... in turn, until one is invalid ("-"
# when the budget ran out first), and the number of steps.
baseline() {
  local mutant=$1 seed=$2 start rounds=0 k fd
  start=$(date +%s.%N)
  while python3 -c "import sys,time; sys.exit(0 if time.time()-float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$start" "$budget_s"; do
    rounds=$((rounds+1))
    if [ -n "${ZLC_LOCK:-}" ]; then exec {fd}>>"$ZLC_LOCK"; flock "$fd"; fi
    for k in $(seq 1 "$baseline_lanes"); do
      rm -rf "$store/b$k"
      # shellcheck disable=SC2086
      "$bin" run --quiet --allow-mutants --recipe "$mutant" --nemesis "$baseline_nemesis" --time "$round" \
        --seed $((seed*1000+(rounds-1)*baseline_lanes+k)) --store "$store/b$k" $explore_args >/dev/null 2>&1 &
    done
    wait
    if [ -n "${ZLC_LOCK:-}" ]; then exec {fd}>&-; fi
    for k in $(seq 1 "$baseline_lanes"); do
      if caught "$store/b$k/latest/results.json"; then
        python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}', sys.argv[2])" "$start" "$rounds"
        return
      fi
    done
  done
  echo "- $rounds"
}
ratios=$(mktemp)
echo
echo "## Time to detect with one command: explore --budget $budget $explore_args ($(date -u +%F), $seeds seeds), beside a random baseline (run --nemesis $baseline_nemesis, $round rounds, $baseline_lanes at once, the same budget)"
printf '| mutant | caught | median (s) | worst (s) | rounds (median) | cause | baseline caught | baseline median (s) | baseline worst (s) | baseline / explore |\n|---|---|---|---|---|---|---|---|---|---|\n'
for mutant in $mutants; do
  out=()
  base=()
  for seed in $(seq 1 "$seeds"); do
    base+=("$(baseline "$mutant" "$seed")")
    # shellcheck disable=SC2086
    locked "$bin" explore --quiet --json --allow-mutants --recipe "$mutant" --budget "$budget" --seed "$seed" --store "$store" $explore_args > "$store/session.json" || true
    out+=("$(python3 - "$store/session.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rounds = s.get("rounds") or []
bad = [r for r in rounds if r["verdict"] == "invalid" and not r.get("honest")]
cause = (bad[0].get("cause") or "-").replace(" ", "_") if bad else "-"
# detected_ns: when the finding's round ended (with lanes, the others' rounds still
# wind down after it); sessions from before lanes have only elapsed_ns.
print(f'{s.get("detected_ns", s["elapsed_ns"])/1e9:.1f}' if bad else "-", len(rounds), cause)
PY
)")
  done
  python3 - "$mutant" "$budget_s" "$ratios" "${#out[@]}" "${out[@]}" "${base[@]}" <<'PY'
import sys, statistics
mutant, budget, ratios, n = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rows = [r.split() for r in sys.argv[5:5 + n]]
base = [r.split() for r in sys.argv[5 + n:]]
caught = sorted(float(t) for t, _, _ in rows if t != "-")
# A seed either side did not catch counts as the whole budget (a lower bound on its
# time), in its median and in the ratio alike.
med = statistics.median(sorted(float(t) if t != "-" else budget for t, _, _ in rows))
worst = f"{max(caught):.1f}" if len(caught) == len(rows) else f">= {budget:.0f} (budget)"
rounds = statistics.median(int(n) for _, n, _ in rows)
causes = ",".join(sorted({c.replace("_", " ") for t, _, c in rows if t != "-"})) or "-"
btimes = sorted(float(t) if t != "-" else budget for t, _ in base)
bcaught = sum(1 for t, _ in base if t != "-")
bmed = statistics.median(btimes)
bworst = f"{max(btimes):.1f}" if bcaught == len(base) else f">= {budget:.0f} (budget)"
open(ratios, "a").write(f"{bmed / med}\n")
print(f"| {mutant} | {len(caught)}/{len(rows)} | {med:.1f} | {worst} | {rounds:g} | {causes} | {bcaught}/{len(base)} | {bmed:.1f} | {bworst} | {bmed / med:.2f} |")
PY
done
python3 - "$ratios" <<'PY'
import sys, statistics
rs = [float(l) for l in open(sys.argv[1]) if l.strip()]
if rs:
    print(f"\nbaseline / explore, median over the mutants: {statistics.median(rs):.2f} (lowest {min(rs):.2f}); a seed either side missed counts as its whole budget")
PY
rm -f "$ratios"
