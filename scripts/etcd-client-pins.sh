#!/bin/sh
# etcd-client-pins.sh: (re)writes the go.mod and go.sum with which `make build` builds
# zlockcheck against another etcd client (lockservice/etcd/clients/vX/client.mod and
# client.sum, read by `go build -modfile`): the module's own go.mod with the client's
# three modules at version X, tidied. Run it after a change to go.mod (make build says
# so when a pin no longer follows it), or with a version to add one:
#
#   scripts/etcd-client-pins.sh            every pinned client again
#   scripts/etcd-client-pins.sh 3.5.35     add (or rewrite) client v3.5.35
set -eu
cd "$(dirname "$0")/.."
versions="$*"
if [ -z "$versions" ]; then
	versions=$(ls lockservice/etcd/clients | sed 's/^v//')
fi
for v in $versions; do
	dir=lockservice/etcd/clients/v$v
	mkdir -p "$dir"
	cp go.mod "$dir/client.mod"
	cp go.sum "$dir/client.sum"
	go mod edit -modfile="$dir/client.mod" -require=go.etcd.io/etcd/client/v3@v$v \
		-require=go.etcd.io/etcd/api/v3@v$v -require=go.etcd.io/etcd/client/pkg/v3@v$v
	go mod tidy -modfile="$dir/client.mod"
	echo "$dir: client v$v"
done
