#!/usr/bin/env bash
# bench/scale.sh BIN STORE WORKERS TIME: one run of 5 nodes and WORKERS gozk workers
# with server faults, sampling the resident memory of the harness, the ZooKeeper
# servers and the workers every second; prints the verdict and the peaks.
set -euo pipefail
bin=$1 store=$2 workers=$3 time=$4
samples=$(mktemp)
"$bin" run --quiet --nodes 5 --workers "$workers" --time "$time" --seed 1 \
  --nemesis kill,pause,partition --nemesis-interval 10s --store "$store" > "$samples.out" 2>&1 &
harness=$!
while kill -0 "$harness" 2>/dev/null; do
  # RSS in KiB of: the harness; every QuorumPeerMain; every worker process.
  h=$(awk '/VmRSS/{print $2}' /proc/$harness/status 2>/dev/null || echo 0)
  s=$(ps -eo rss=,args= | awk '/QuorumPeerMain/ && !/awk/ {sum+=$1} END{print sum+0}')
  w=$(ps -eo rss=,args= | awk '/zlockcheck worker/ && !/awk/ {sum+=$1} END{print sum+0}')
  echo "$h $s $w" >> "$samples"
  sleep 1
done
wait "$harness" || true
verdict=$(grep -E '^verdict' "$samples.out" | tr -s ' ' || echo "verdict: (none)")
ops=$(grep -E 'ops by' "$samples.out" | head -1 | sed 's/^ *//')
awk -v v="$verdict" -v o="$ops" '
  {if ($1>h) h=$1; if ($2>s) s=$2; if ($3>w) w=$3; t=$1+$2+$3; if (t>a) a=t}
  END {
    printf "| %s | %s |\n|---|---|\n", "what", "figure"
    printf "| run | %s |\n| %s | |\n", o, v
    printf "| peak RSS, harness | %.0f MiB |\n", h/1024
    printf "| peak RSS, 5 ZooKeeper servers | %.0f MiB |\n", s/1024
    printf "| peak RSS, all workers | %.0f MiB |\n", w/1024
    printf "| peak RSS, all together | %.0f MiB |\n", a/1024
  }' "$samples"
rm -f "$samples" "$samples.out"
