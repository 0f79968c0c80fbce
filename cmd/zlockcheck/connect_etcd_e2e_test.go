package main

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestConnectToAnExistingEtcd: an etcd the test started outside the tool (in a
// namespace the test made, on a port other than 2379) is tested with --connect:
// server faults and a release are refused; etcd-mutex-validity under client kills and
// revoked leases aimed at the holder is valid, or invalid by an unfenced overlap
// only (a revoked lease: its holder cannot know), never a recipe bug; the run leaves
// no key on the cluster and nothing on the host.
func TestConnectToAnExistingEtcd(t *testing.T) {
	requireEtcd(t)
	nodes := testnodes.StartT(t, 1)
	addr, stop, err := nodes.StartEtcd(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	fwd := forwardingOf(t, nodes.Bridge())
	base := []string{"run", "--recipe", "etcd-mutex-validity", "--connect", addr, "--seed", "2"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nemesis", "kill"}, "does not manage them"},
		{[]string{"--etcd-version", "3.6.16"}, "runs the release its owners installed"},
	} {
		code, _, stderr := zlockcheck(t, append(append(base, "--store", t.TempDir()), c.args...)...)
		if code != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, exitError, c.want)
		}
	}
	store := keptIfFailed(t)
	code, stdout, stderr := zlockcheck(t, append(base, "--time", "10s", "--session-timeout", "2s", "--store", store,
		"--nemesis", "client-kill,session-expire", "--nemesis-targets", "holder", "--nemesis-interval", "2s")...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid && (code != exitInvalid || !strings.Contains(stdout, "UNFENCED OVERLAP") || strings.Contains(stdout, "RECIPE BUG")) {
		t.Fatalf("exit %d, want valid, or invalid by an unfenced overlap only", code)
	}
	if !strings.Contains(stdout, "etcd 3.4.23 (existing, not managed by zlockcheck)") {
		t.Error("the run does not say the etcd was an existing one")
	}
	assertFaultsApplied(t, stderr)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := c.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the run left keys on the cluster: %v, %v", resp, err)
	}
	assertHostLeftNothing(t, store, nodes.Bridge(), fwd)
}
