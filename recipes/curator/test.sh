#!/bin/bash
# Tests the Curator worker against a real, private standalone ZooKeeper on 127.0.0.1:
# builds the worker, starts the server (tickTime 200 ms, a free port, a temporary data
# dir), runs scripted protocol sessions with two or three workers per recipe
# (protocol_test.py), and removes everything it started or created on every exit path.
#
#   recipes/curator/test.sh            exit 0 when every check passed
#
# ZLC_TEST_KEEP=1 keeps the temporary directory (server and worker logs) for a look.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zlc-curator-test.XXXXXX")
zk_pid=
cleanup() {
	rc=$?
	trap - EXIT INT TERM
	if [ -n "$zk_pid" ] && kill -0 "$zk_pid" 2>/dev/null; then
		kill -CONT "$zk_pid" 2>/dev/null || true
		kill "$zk_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$zk_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$zk_pid" 2>/dev/null || true
		wait "$zk_pid" 2>/dev/null || true
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

echo "== build"
"$here/build.sh" "$tmp/build"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$tmp/zk/data" "$tmp/logs"
cat > "$tmp/zk/zoo.cfg" <<CFG
tickTime=200
clientPortAddress=127.0.0.1
clientPort=$port
dataDir=$tmp/zk/data
4lw.commands.whitelist=*
admin.enableServer=false
CFG
echo "== ZooKeeper on 127.0.0.1:$port"
java -Xmx256m -XX:+UseSerialGC -cp /usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar \
	-Dorg.slf4j.simpleLogger.logFile=System.err -Dorg.slf4j.simpleLogger.showDateTime=true \
	org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/zk/zoo.cfg" >"$tmp/logs/server.log" 2>&1 &
zk_pid=$!
srvr() { (exec 3<>"/dev/tcp/127.0.0.1/$port" && echo srvr >&3 && cat <&3) 2>/dev/null; }
for i in $(seq 100); do
	if srvr | grep -q '^Mode: standalone'; then break; fi
	if ! kill -0 "$zk_pid" 2>/dev/null || [ "$i" = 100 ]; then
		echo "ZooKeeper did not start; its log:" >&2
		tail -30 "$tmp/logs/server.log" >&2
		exit 1
	fi
	sleep 0.2
done

echo "== protocol sessions"
ZLC_ZK_PID=$zk_pid python3 "$here/protocol_test.py" "127.0.0.1:$port" "$here/run.sh $tmp/build" "$tmp/logs" || {
	rc=$?
	echo "== failed; worker logs are in $tmp/logs (kept with ZLC_TEST_KEEP=1); last lines:" >&2
	for f in "$tmp"/logs/*.stderr.log; do
		echo "--- $f" >&2
		tail -5 "$f" >&2
	done
	exit "$rc"
}
