# Sourced by the bench scripts after `cd` to the checkout: builds the tool into $bin,
# makes a run store ($store, removed on exit) and defines locked, which runs a command
# under flock $ZLC_LOCK when set (a machine shared with other suites).
bin=bin/zlockcheck
go build -o "$bin" ./cmd/zlockcheck
locked() { if [ -n "${ZLC_LOCK:-}" ]; then flock "$ZLC_LOCK" "$@"; else "$@"; fi; }
store=$(mktemp -d "${TMPDIR:-/tmp}/zlc-bench.XXXXXX")
chmod 755 "$store" # PostgreSQL runs as the postgres user, which must enter the run directory
trap 'rm -rf "$store"' EXIT
