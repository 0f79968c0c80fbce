#!/usr/bin/env bash
# Benchmarks behind BENCHMARKS.md (make bench, about 12 minutes). Needs root and
# ZooKeeper (make setup). Prints markdown tables.
#  1. Harness overhead: lock cycles per second of gozk through the harness (worker
#     processes, pipes, recorder) next to a plain go-zookeeper loop with as many
#     goroutines on the same ensemble (run --baseline: harness, then plain loop, on one
#     ensemble), alternated A B A B, for 5 and 20 workers. The ratio compares steady
#     states: the plain loop opens its sessions before its clock starts, so the
#     harness's rate counts from the moment every worker process had asked for the lock
#     (results.json's steady_cycles_per_second); the whole-run rate is shown too.
#     Then the same at --hold-max 1ms (issue 15), against a plain loop of goroutines
#     and one of processes (--baseline-processes).
#  2. Set-up cost: time to quorum and to a clean teardown, 3 and 5 nodes.
#  3. Scale: 5 nodes, 100 gozk workers, 60 s with server faults: verdict and peak memory
#     of the harness, the servers and the workers.
#  4. Checker: bench/checker.sh.
# Time to detect is bench/detect.sh (make bench-detect), which takes longer.
# BENCH_ONLY="short setup" runs only those sections (overhead, short, setup, scale,
# checker).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
want() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }
echo "# zlockcheck benchmarks ($(date -u +%F), $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB)"
echo
if want overhead; then
echo "## Harness vs plain go-zookeeper loop"
printf '| rep | workers | harness cycles/s (whole run) | harness cycles/s (steady) | plain loop cycles/s | ratio (steady / plain) |\n|---|---|---|---|---|---|\n'
for workers in ${BENCH_WORKERS:-5 20}; do
  for rep in 1 2; do
    "$bin" run --quiet --time "${BENCH_TIME:-20s}" --workers "$workers" --seed "$rep" --baseline \
      --final-phase=false --store "$store" >/dev/null
    python3 - "$store/latest/results.json" "$rep" "$workers" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b = r["baseline"]
plain = b["cycles"] / (b["duration_ns"] / 1e9)
steady = r["steady_cycles_per_second"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['cycles_per_second']:.1f} | {steady:.1f} | {plain:.1f} | {steady/plain:.2f} |")
PY
  done
done
fi
echo
if want short; then
echo "## Harness vs plain go-zookeeper loop, short holds (--hold-max 1ms)"
# With 1 ms holds the lock no longer caps both sides, so the harness's own cost shows
# (issue 15). Each run is the harness (gozk, protocol v3), then on the same ensemble a
# plain loop of goroutines (--baseline: W sessions in one process, the issue's
# yardstick), then one of processes (--baseline-processes: one OS process per session in
# the worker namespaces, as the workers run), which tells what one process per client
# costs apart from what the harness costs. --baseline first warms the servers with 10 s
# of the plain loop, untimed (--baseline-warmup), so that neither side is timed on cold
# JVMs (BENCHMARKS.md, sixth look). BENCH_PROTOCOLS="3 2 1" adds the same worker
# held to protocol v2 and v1 (zlockcheck worker --protocol N, as an exec worker).
printf '| rep | workers | protocol | harness cycles/s (steady) | plain loop, goroutines | plain loop, processes | harness / goroutines | harness / processes | processes / goroutines |\n|---|---|---|---|---|---|---|---|---|\n'
for workers in ${BENCH_WORKERS:-5 20}; do
  for rep in $(seq "${BENCH_REPS:-2}"); do
    for proto in ${BENCH_PROTOCOLS:-3}; do
      worker=()
      if [ "$proto" != 3 ]; then
        worker=(--recipe exec --worker-cmd "$PWD/$bin worker --protocol $proto --recipe gozk")
      fi
      "$bin" run --quiet --time "${BENCH_TIME:-20s}" --workers "$workers" --seed "$rep" --baseline --baseline-processes \
        --final-phase=false --hold-max 1ms --store "$store" "${worker[@]}" >/dev/null
      python3 - "$store/latest/results.json" "$rep" "$workers" "v$proto" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rate = lambda b: b["cycles"] / (b["duration_ns"] / 1e9)
g, p = rate(r["baseline"]), rate(r["baseline_processes"])
h = r["steady_cycles_per_second"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {h:.1f} | {g:.1f} | {p:.1f} | {h/g:.2f} | {h/p:.2f} | {p/g:.2f} |")
PY
    done
  done
done
fi
echo
if want setup; then
echo "## Set-up and teardown"
printf '| nodes | rep | to quorum (s) | teardown (s) | whole run of 1 s, wall (s) |\n|---|---|---|---|---|\n'
for nodes in 3 5; do
  for rep in 1 2 3; do
    t0=$(date +%s.%N)
    "$bin" run --quiet --time 1s --nodes "$nodes" --workers 5 --seed "$rep" --final-phase=false --store "$store" >/dev/null
    t1=$(date +%s.%N)
    python3 - "$store/latest/timings.json" "$nodes" "$rep" "$t0" "$t1" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {t['quorum_ns']/1e9:.2f} | {t['teardown_ns']/1e9:.2f} | {float(sys.argv[5])-float(sys.argv[4]):.1f} |")
PY
  done
done
fi
echo
if want scale; then
echo "## Scale: 5 nodes, ${BENCH_SCALE_WORKERS:-100} gozk workers, 60 s, server faults"
bash bench/scale.sh "$bin" "$store" "${BENCH_SCALE_WORKERS:-100}" "${BENCH_SCALE_TIME:-60s}"
fi
echo
if want checker; then
echo "## Checker"
bash bench/checker.sh
fi
