#!/usr/bin/env bash
# Time to detect (make bench-detect): for every mutant of zlc-mutex under the run that
# exposes it, and under other aims of the same faults, SEEDS (default 5) runs of TIME
# (default 30s); prints the median and the worst time from the start of the run to
# the first violation (the liveness verdict's time for the deadlocking mutants), and
# how many seeds caught it; then the same for one default command, explore with a
# budget (BUDGET, default 5m). ONLY=hand or ONLY=explore runs one of the two tables.
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
# command's other flags (default: the sync window closed, as examples/nightly.yaml);
# MUTANTS the mutants to run (default: every mutant of zlc-mutex).
budget=${BUDGET:-5m}
explore_args=${EXPLORE_ARGS:---sync-limit 10}
mutants=${MUTANTS:-$("$bin" recipes --allow-mutants | awk '/^mutant-/ && !/^mutant-(herd|redis|redlock|pg-|mariadb)/ {print $1}')}
echo
echo "## Time to detect with one command: explore --budget $budget $explore_args ($(date -u +%F), $seeds seeds)"
printf '| mutant | caught | median (s) | worst (s) | rounds (median) | cause |\n|---|---|---|---|---|---|\n'
for mutant in $mutants; do
  out=()
  for seed in $(seq 1 "$seeds"); do
    # shellcheck disable=SC2086
    locked "$bin" explore --quiet --json --allow-mutants --recipe "$mutant" --budget "$budget" --seed "$seed" --store "$store" $explore_args > "$store/session.json" || true
    out+=("$(python3 - "$store/session.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rounds = s.get("rounds") or []
bad = [r for r in rounds if r["verdict"] == "invalid"]
cause = (bad[0].get("cause") or "-").replace(" ", "_") if bad else "-"
print(f'{s["elapsed_ns"]/1e9:.1f}' if bad else "-", len(rounds), cause)
PY
)")
  done
  python3 - "$mutant" "${out[@]}" <<'PY'
import sys, statistics
mutant, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
caught = sorted(float(t) for t, _, _ in rows if t != "-")
med = f"{statistics.median(caught):.1f}" if caught else "-"
worst = f"{max(caught):.1f}" if len(caught) == len(rows) else "not caught in every seed"
rounds = statistics.median(int(n) for _, n, _ in rows)
causes = ",".join(sorted({c.replace("_", " ") for t, _, c in rows if t != "-"})) or "-"
print(f"| {mutant} | {len(caught)}/{len(rows)} | {med} | {worst} | {rounds:g} | {causes} |")
PY
done
