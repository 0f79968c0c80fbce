#!/usr/bin/env bash
# Benchmarks behind BENCHMARKS.md. Needs root and ZooKeeper (make setup).
#  1. Harness overhead: lock cycles per second of a gozk run through the harness (worker
#     processes, pipes, recorder) next to a plain go-zookeeper loop with as many
#     goroutines on the same ensemble (run --baseline), for 5 workers, twice.
#  2. Checker: bench/checker.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/zlockcheck
go build -o "$bin" ./cmd/zlockcheck
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
echo "## Harness vs plain go-zookeeper loop ($(date -u +%F), $(nproc) cores)"
printf '| run | workers | harness cycles/s | plain loop cycles/s | ratio |\n|---|---|---|---|---|\n'
for workers in ${BENCH_WORKERS:-5}; do
  for rep in 1 2; do
    "$bin" run --quiet --time "${BENCH_TIME:-20s}" --workers "$workers" --seed "$rep" --baseline --store "$store" >/dev/null
    python3 - "$store/latest/results.json" "$rep" "$workers" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b = r["baseline"]
plain = b["cycles"] / (b["duration_ns"] / 1e9)
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['cycles_per_second']:.1f} | {plain:.1f} | {r['cycles_per_second']/plain:.2f} |")
PY
  done
done
echo
echo "## Checker"
bash bench/checker.sh
