#!/bin/sh
# zlc-ssh-nodes.sh: SSH "nodes" on this machine, to try `zlockcheck run --ssh-nodes` by
# hand (root needed). It runs the tests' own fixture (internal/testnodes, through
# `go run ./internal/testnodes/cmd`), so there is one implementation of it: N network
# namespaces behind a bridge zlc<id>nb, each running Debian's sshd on its address.
# The nodes share this machine's filesystem (see internal/testnodes).
#
#   scripts/zlc-ssh-nodes.sh up N DIR   start N nodes, files in DIR; prints DIR/nodes.env
#   scripts/zlc-ssh-nodes.sh down DIR   stop them and remove everything they made
#
# Then, e.g.:  . DIR/nodes.env; zlockcheck run --ssh-nodes "$SSH_NODES" \
#   --ssh-key "$SSH_KEY" --ssh-known-hosts "$SSH_KNOWN_HOSTS"
set -eu
cd "$(dirname "$0")/.."

case "${1:-}" in
up)
	[ $# -eq 3 ] || { echo "usage: $0 up N DIR" >&2; exit 2; }
	mkdir -p "$3"
	dir=$(cd "$3" && pwd)
	[ ! -f "$dir/helper.pid" ] || { echo "$dir already has nodes (run: $0 down $dir)" >&2; exit 1; }
	rm -f "$dir/nodes.env"
	go build -o "$dir/testnodes" ./internal/testnodes/cmd
	nohup "$dir/testnodes" "$2" "$dir" >"$dir/helper.log" 2>&1 &
	echo $! >"$dir/helper.pid"
	i=0
	while [ ! -f "$dir/nodes.env" ]; do
		if ! kill -0 "$(cat "$dir/helper.pid")" 2>/dev/null; then
			rm -f "$dir/helper.pid"
			cat "$dir/helper.log" >&2
			exit 1
		fi
		i=$((i + 1))
		[ $i -lt 300 ] || { echo "nodes not up after 30 s; see $dir/helper.log" >&2; exit 1; }
		sleep 0.1
	done
	cat "$dir/nodes.env"
	;;
down)
	[ $# -eq 2 ] || { echo "usage: $0 down DIR" >&2; exit 2; }
	dir=$(cd "$2" && pwd)
	[ -f "$dir/helper.pid" ] || { echo "no nodes in $dir" >&2; exit 1; }
	pid=$(cat "$dir/helper.pid")
	kill -TERM "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	rm -f "$dir/helper.pid" "$dir/testnodes"
	cat "$dir/helper.log"
	;;
*)
	echo "usage: $0 up N DIR | down DIR" >&2
	exit 2
	;;
esac
