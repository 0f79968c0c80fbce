#!/usr/bin/env bash
# Time to detect (make bench-detect): for every mutant of zlc-mutex under the run that
# exposes it, and under other aims of the same faults, SEEDS (default 5) runs of TIME
# (default 30s); prints the median and the worst time from the start of the run to
# the first violation (the liveness verdict's time for the deadlocking mutants), and
# how many seeds caught it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/zlockcheck
go build -o "$bin" ./cmd/zlockcheck
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
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
)
echo "## Time to detect ($(date -u +%F), $seeds seeds of $time each)"
printf '| mutant | faults | caught | median (s) | worst (s) |\n|---|---|---|---|---|\n'
for c in "${cases[@]}"; do
  IFS='|' read -r mutant label args <<< "$c"
  times=()
  for seed in $(seq 1 "$seeds"); do
    # shellcheck disable=SC2086
    "$bin" run --quiet --allow-mutants --recipe "$mutant" --time "$time" --seed "$seed" --store "$store" $args >/dev/null || true
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
