package redis

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// TestRedisSentinelsFailOver: three instances with a sentinel beside each form (every
// sentinel knows the primary, both replicas and the two other sentinels), name
// instance 1 the primary, and, once it is killed, promote a replica by themselves
// within a few seconds, which the run's watch records as a failover from s1 to the
// promoted instance, over once it serves alone; the marker survives the sentinels' rewrites of their files,
// and Close leaves no redis-server or redis-sentinel behind.
func TestRedisSentinelsFailOver(t *testing.T) {
	dir := t.TempDir()
	net := redisNet(t, dir)
	ctx := context.Background()
	start := time.Now()
	r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisSentinel}, Nodes: 3, Dir: dir})
	if r != nil {
		defer r.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 instances and their sentinels formed after %s", time.Since(start))
	if len(r.SentinelNodes) != 3 {
		t.Fatalf("%d sentinels, want 3", len(r.SentinelNodes))
	}
	if got, err := r.SentinelPrimary(ctx); err != nil || got != lockservice.ServerAddr(1).String()+":6379" {
		t.Fatalf("SentinelPrimary = %q, %v; want instance 1", got, err)
	}
	watchCtx, endWatch := context.WithCancel(ctx)
	seen := make(chan lockservice.Failover, 16)
	watched := make(chan struct{})
	go func() { defer close(watched); r.WatchFailovers(watchCtx, func(f lockservice.Failover) { seen <- f }) }()
	defer func() { endWatch(); <-watched }()
	time.Sleep(3 * failoverPoll) // a settled topology: nothing recorded
	select {
	case f := <-seen:
		t.Fatalf("the watch recorded %+v before any fault", f)
	default:
	}
	killed := time.Now()
	if err := r.Instances[0].Host.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	var promoted string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err := r.SentinelPrimary(ctx); err == nil && got != lockservice.ServerAddr(1).String()+":6379" {
			promoted = got
			break
		}
	}
	if promoted == "" {
		t.Fatalf("no replica promoted 15 s after the primary was killed (sentinel logs: %s)", filepath.Join(dir, "s2", "sentinel.log"))
	}
	t.Logf("the sentinels named %s the primary %s after the kill", promoted, time.Since(killed))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		id, ok := r.Leader(ctx)
		if ok && id != 1 && r.Instances[id-1].ClientAddr() == promoted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Leader = %d, %v: the instance the sentinels name (%s) does not say it is the primary", id, ok, promoted)
		}
	}
	var records []lockservice.Failover
	for len(records) < 2 {
		select {
		case f := <-seen:
			records = append(records, f)
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch recorded %+v, want a failover's start and stop", records)
		}
	}
	name := serverName(slices.IndexFunc(r.Instances, func(in *lockservice.Member) bool { return in.ClientAddr() == promoted }) + 1)
	if start, stop := records[0], records[1]; start.Stop || start.Primary != "s1" || !stop.Stop || stop.Primary != "s1" || stop.Promoted != name || stop.Aborted {
		t.Errorf("the watch recorded %+v, want a failover's start from s1 and its stop naming %s", records, name)
	}
	endWatch()
	<-watched
	for _, s := range r.SentinelNodes {
		b, err := os.ReadFile(s.Conf)
		if err != nil || !strings.HasPrefix(string(b), redisMarker) {
			t.Errorf("sentinel %d's %s lost the marker cleanup looks for (%v):\n%.300s", s.ID, s.Conf, err, b)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if left := redisUnder(dir); len(left) > 0 {
		t.Errorf("Close left processes: %v", left)
	}
}

// TestRedisSentinelsThatWillNotForm: a sentinel binary that is missing, or that exits,
// is an error naming it (with its log), and nothing is left.
func TestRedisSentinelsThatWillNotForm(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-sentinel.sh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'fake: no sentinel here' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		binary string
		want   []string
	}{
		{fake, []string{"sentinel 1 exited", "fake: no sentinel here"}},
		{filepath.Join(dir, "no-such-sentinel"), []string{"not found", "redis-sentinel"}},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.binary), func(t *testing.T) {
			sub := filepath.Join(dir, filepath.Base(c.binary)+".d")
			net := redisNet(t, sub)
			startRefused(t, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisSentinel}, Nodes: 3,
				Dir: sub, SentinelBinary: c.binary, StartTimeout: 5 * time.Second}, c.want)
			if left := redisUnder(sub); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
		})
	}
}
