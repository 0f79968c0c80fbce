package main

import "testing"

// The conformance suite itself is tested in package conformance; here, the command
// line only (no server is started: each case stops at its flags, or at the private
// server's settings before anything is made).
func TestConformanceFlags(t *testing.T) {
	expectRefused(t, []flagCase{
		{[]string{"conformance"}, "--worker-cmd is required"},
		{[]string{"conformance", "--worker-cmd", "true", "--kind", "nonesuch"}, "--kind"},
		{[]string{"conformance", "--worker-cmd", "true", "extra"}, "unexpected arguments"},
		{[]string{"conformance", "--worker-cmd", "true", "--rules", "nonesuch"}, `no rule "nonesuch"`},
		{[]string{"conformance", "--worker-cmd", "true", "--service", "consul"}, `--service: want zookeeper, redis`},
		{[]string{"conformance", "--worker-cmd", "true", "--service", "redis", "--observers", "2"}, "--observers: ZooKeeper settings for the Redis service: add --service zookeeper"},
		{[]string{"conformance", "--worker-cmd", "true", "--service", "postgres", "--zksim"}, "--zksim: the wire simulator is a ZooKeeper"},
		{[]string{"conformance", "--worker-cmd", "true", "--service", "redis", "--redis-topology", "replicas"}, "redis topology replicas: private servers are one instance, or RedLock"},
		{[]string{"conformance", "--worker-cmd", "true", "--observers", "1"}, "observers: a private server is one standalone ZooKeeper"},
	})
}
