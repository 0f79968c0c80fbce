#!/usr/bin/env bash
# Checker figures for BENCHMARKS.md: for 100k and 1M-op mutex histories (50 processes,
# 5% crashed ops), valid and with one planted double grant, the wall time and peak
# memory of `zlockcheck check` next to the time to only load (parse and validate) the
# same file (`go test -bench BenchmarkLoad` equivalent via `zlockcheck check --parse-only`).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/zlockcheck
[ -x "$bin" ] || go build -o "$bin" ./cmd/zlockcheck
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/genhistory" ./bench/genhistory
printf '| history | file | parse only: time, peak RSS | check: time, peak RSS | verdict |\n|---|---|---|---|---|\n'
for ops in 100000 1000000; do
  for dg in 0 1; do
    f="$tmp/h-$ops-$dg.jsonl"
    "$tmp/genhistory" -ops "$ops" -procs 50 -crash 0.05 -double-grants "$dg" -seed 1 -out "$f"
    size=$(du -h "$f" | cut -f1)
    parse=$( { /usr/bin/time -f '%e s, %M KiB' "$bin" check --parse-only "$f" >/dev/null; } 2>&1 | tail -1)
    set +e
    check=$( { /usr/bin/time -f '%e s, %M KiB' "$bin" check "$f" >"$tmp/out"; } 2>&1 | tail -1)
    set -e
    verdict=$(grep -o 'verdict: *[A-Z]*' "$tmp/out" | awk '{print $2}')
    label="$ops ops, $([ "$dg" = 0 ] && echo valid || echo 'one double grant')"
    printf '| %s | %s | %s | %s | %s |\n' "$label" "$size" "$parse" "$check" "$verdict"
  done
done
