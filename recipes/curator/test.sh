#!/bin/bash
# Tests the Curator worker against a real, private standalone ZooKeeper on 127.0.0.1
# (scripts/with-zk.sh: tickTime 200 ms, a free port, a temporary data dir): builds the
# worker, runs scripted protocol sessions with two or three workers per recipe
# (protocol_test.py), then harness-like runs checked by zlockcheck, and removes
# everything it started or created on every exit path.
#
#   recipes/curator/test.sh            exit 0 when every check passed
#
# ZLC_TEST_KEEP=1 keeps the temporary directories (server and worker logs) for a look.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# The server: scripts/with-zk.sh runs this script again with ZLC_ZK_CONNECT and
# ZLC_ZK_PID set (the tests pause and resume the server by its pid).
if [ -z "${ZLC_ZK_PID:-}" ]; then
	exec bash "$here/../../scripts/with-zk.sh" bash "$0" "$@"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zlc-curator-test.XXXXXX")
driver=
cleanup() {
	rc=$?
	trap - EXIT INT TERM
	if [ -n "$driver" ]; then
		# The Python driver kills its workers when it gets SIGTERM.
		kill "$driver" 2>/dev/null || true
		wait "$driver" 2>/dev/null || true
	fi
	if [ "${ZLC_TEST_KEEP:-}" = 1 ]; then
		echo "kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a driver in the background and waits for it, so that a signal reaches the traps
# at once instead of after the driver ends.
drive() {
	"$@" &
	driver=$!
	local rc=0
	wait "$driver" || rc=$?
	driver=
	return "$rc"
}

echo "== build"
"$here/build.sh" "$tmp/build"

mkdir -p "$tmp/logs"
echo "== ZooKeeper on $ZLC_ZK_CONNECT (pid $ZLC_ZK_PID)"

echo "== protocol sessions"
drive python3 "$here/protocol_test.py" "$ZLC_ZK_CONNECT" "$here/run.sh $tmp/build" "$tmp/logs" || {
	rc=$?
	echo "== failed; worker logs are in $tmp/logs (kept with ZLC_TEST_KEEP=1); last lines:" >&2
	for f in "$tmp"/logs/*.stderr.log; do
		echo "--- $f" >&2
		tail -5 "$f" >&2
	done
	exit "$rc"
}

# A harness-like run per recipe, checked by zlockcheck's checker: ZLC_CHECK_BIN, else a
# zlockcheck built from this checkout (offline), else bin/zlockcheck; skipped if none.
checker=${ZLC_CHECK_BIN:-}
if [ -z "$checker" ] && command -v go >/dev/null 2>&1; then
	if (cd "$here/../.." && GOPROXY=off GOFLAGS=-mod=readonly go build -o "$tmp/zlockcheck" ./cmd/zlockcheck) 2>"$tmp/logs/go-build.log"; then
		checker=$tmp/zlockcheck
	fi
fi
if [ -z "$checker" ] && [ -x "$here/../../bin/zlockcheck" ]; then
	checker=$here/../../bin/zlockcheck
fi
if [ -z "$checker" ]; then
	echo "== harness-like runs skipped: no zlockcheck binary (set ZLC_CHECK_BIN)"
	exit 0
fi
echo "== harness-like runs (5 workers, ${ZLC_STRESS_SECONDS:-15}s each, server paused twice, one worker killed), checked by $checker"
fails=0
for spec in "curator-mutex mutex 1" "curator-semaphore semaphore 2" "curator-rwlock rwlock 1" "curator-reentrant reentrant 1"; do
	set -- $spec
	echo "$1 ($2${3:+, permits $3})"
	drive python3 "$here/stress.py" "$ZLC_ZK_CONNECT" "$here/run.sh $tmp/build" "$1" "$2" \
		"${ZLC_STRESS_SECONDS:-15}" "$tmp/logs/stress-$1" "$checker" "$3" || fails=$((fails + 1))
done
if [ "$fails" != 0 ]; then
	echo "== $fails harness-like run(s) failed; histories and logs in $tmp/logs/stress-* (kept with ZLC_TEST_KEEP=1)" >&2
	exit 1
fi
echo "== all passed"
