#!/bin/bash
# Runs a command with a private standalone ZooKeeper on 127.0.0.1 (Debian's zookeeper
# package; tickTime 200 ms, a free port, a temporary data dir named zlc-zk.*), its
# address in ZLC_ZK_CONNECT and its pid in ZLC_ZK_PID (tests pause it), and removes the
# server and its directory on every exit path. make test uses it for the recipe tests
# that talk to a ZooKeeper directly (recipes/, recipes/zlcmutex/, recipes/curator/).
#
#   scripts/with-zk.sh go test ./recipes/...
#
# ZLC_TEST_KEEP=1 keeps the directory (the server's log) for a look.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zlc-zk.XXXXXX")
zk_pid=
child=
cleanup() {
	rc=$?
	trap - EXIT INT TERM
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
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

jars=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar
[ -f /usr/share/java/zookeeper.jar ] || { echo "$0: /usr/share/java/zookeeper.jar not found: install Debian's zookeeper package (make setup)" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$tmp/data"
cat > "$tmp/zoo.cfg" <<CFG
tickTime=200
clientPortAddress=127.0.0.1
clientPort=$port
dataDir=$tmp/data
4lw.commands.whitelist=*
admin.enableServer=false
CFG
java -Xmx256m -XX:+UseSerialGC -cp "$jars" -Dorg.slf4j.simpleLogger.logFile=System.err \
	org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/zoo.cfg" >"$tmp/server.log" 2>&1 &
zk_pid=$!
# A server still starting may accept the connection and never answer: each try is
# bounded, or cat would wait forever (a make test hung here once, 2026-11-24).
srvr() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && echo srvr >&3 && cat <&3' _ "$port" 2>/dev/null; }
for i in $(seq 150); do
	if srvr | grep -q '^Mode: standalone'; then break; fi
	if ! kill -0 "$zk_pid" 2>/dev/null || [ "$i" = 150 ]; then
		echo "$0: ZooKeeper did not start; its log:" >&2
		tail -30 "$tmp/server.log" >&2
		exit 1
	fi
	sleep 0.2
done
export ZLC_ZK_CONNECT=127.0.0.1:$port ZLC_ZK_PID=$zk_pid
"$@" &
child=$!
rc=0
wait "$child" || rc=$?
child=
exit "$rc"
