package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// The etcd recipe tests start a private etcd (Debian's etcd-server) on 127.0.0.1, as
// the Redis recipe tests start their redis-server, for the same reasons
// (redis_test.go): the recipe runs in the test's process and dials its addresses
// itself.

// etcdServer is one private single-member etcd of a test.
type etcdServer struct {
	addr  string
	admin *clientv3.Client
}

// startEtcd starts Debian's etcd on free ports of 127.0.0.1, in a directory of its
// own, and kills it when t ends.
func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Etcd)
	dir := t.TempDir()
	addr, peer := freeAddr(t), freeAddr(t)
	cmd := exec.Command("/usr/bin/etcd", "--data-dir", filepath.Join(dir, "data"), "--listen-client-urls", "http://"+addr,
		"--advertise-client-urls", "http://"+addr, "--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "default=http://"+peer, "--logger", "zap", "--log-outputs", filepath.Join(dir, "etcd.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = c.Get(ctx, "x")
		cancel()
		if err == nil {
			return &etcdServer{addr: addr, admin: c}
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
	t.Fatalf("etcd on %s did not answer: %v\n%s", addr, err, log)
	return nil
}

// recordingEvents counts what a recipe reports.
type recordingEvents struct {
	lost     atomic.Int32
	sessions atomic.Int32
	last     atomic.Int64
}

func (e *recordingEvents) Lost(string)                { e.lost.Add(1) }
func (e *recordingEvents) Session(id int64, _ []byte) { e.sessions.Add(1); e.last.Store(id) }
func (e *recordingEvents) Renewed()                   {}

func newEtcdRecipe(t *testing.T, s *etcdServer, v etcdVariant, path string, ev *recordingEvents) *etcdMutex {
	t.Helper()
	r, err := newEtcdMutex(context.Background(), Config{Servers: []string{s.addr}, SessionTimeout: 2 * time.Second, Path: path,
		Kind: workloads.Counter, CounterPath: path + "-counter", Fenced: true, Events: ev}, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*etcdMutex)
}

// TestEtcdMutex: grants in turn with growing create revisions as tokens, a timed-out
// acquire that leaves no key, lost when the session's lease is revoked, a fenced
// write refused after it, and a new session for the next acquire.
func TestEtcdMutex(t *testing.T) {
	s := startEtcd(t)
	ctx := context.Background()
	ev1, ev2 := &recordingEvents{}, &recordingEvents{}
	a := newEtcdRecipe(t, s, etcdCorrect, "/zlc/t1", ev1)
	b := newEtcdRecipe(t, s, etcdCorrect, "/zlc/t1", ev2)
	g1, err := a.Acquire(ctx, AcquireRequest{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if g1.Lock == nil || g1.Lock.Session != fmt.Sprintf("0x%x", ev1.last.Load()) || len(g1.Lock.Keys) != 1 || !strings.HasPrefix(g1.Lock.Keys[0], "/zlc/t1/") {
		t.Errorf("grant's place = %+v", g1.Lock)
	}
	start := time.Now()
	_, err = b.Acquire(ctx, AcquireRequest{Timeout: 300 * time.Millisecond})
	if o, _ := Classify(err); o != workloads.ReplyFail || !errors.Is(err, ErrTimeout) || time.Since(start) > 2*time.Second {
		t.Fatalf("acquire of a held lock: %v after %s, want a timeout fail", err, time.Since(start))
	}
	if resp, err := s.admin.Get(ctx, "/zlc/t1/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Errorf("keys under the lock after the timeout: %d, %v; want the holder's only", resp.Count, err)
	}
	if err := a.Write(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g2, err := b.Acquire(ctx, AcquireRequest{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var t1, t2 int64
	if json.Unmarshal(g1.Token, &t1) != nil || json.Unmarshal(g2.Token, &t2) != nil || t2 <= t1 {
		t.Errorf("tokens %s then %s: want create revisions that grow", g1.Token, g2.Token)
	}
	// The servers end b's lease: b reports lost, its fenced write is refused, and
	// its next acquire makes a new session.
	if _, err := s.admin.Revoke(ctx, clientv3.LeaseID(ev2.last.Load())); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(ctx, 8); !errors.Is(err, ErrFenced) {
		t.Errorf("fenced write after the revoke: %v, want ErrFenced", err)
	}
	for deadline := time.Now().Add(3 * time.Second); ev2.lost.Load() == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if ev2.lost.Load() != 1 {
		t.Fatalf("lost reported %d times after the revoke, want once", ev2.lost.Load())
	}
	if err := b.Release(ctx); err == nil {
		t.Error("release after lost: ok, want not held")
	}
	if _, err := b.Acquire(ctx, AcquireRequest{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if ev2.sessions.Load() != 2 {
		t.Errorf("sessions reported: %d, want 2", ev2.sessions.Load())
	}
	if v, err := b.Read(ctx); err != nil || v != 7 {
		t.Errorf("counter = %d, %v", v, err)
	}
}

// TestEtcdMutantsBreakTheLock: the mutants that do not wait grant a held lock; the one
// that ignores Done() never reports lost.
func TestEtcdMutantsBreakTheLock(t *testing.T) {
	s := startEtcd(t)
	ctx := context.Background()
	a := newEtcdRecipe(t, s, etcdCorrect, "/zlc/t2", &recordingEvents{})
	if _, err := a.Acquire(ctx, AcquireRequest{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	m := newEtcdRecipe(t, s, etcdNoWait, "/zlc/t2", &recordingEvents{})
	if _, err := m.Acquire(ctx, AcquireRequest{Timeout: 300 * time.Millisecond}); err != nil {
		t.Errorf("mutant-etcd-no-wait: %v, want granted while held", err)
	}
	ev := &recordingEvents{}
	d := newEtcdRecipe(t, s, etcdIgnoreDone, "/zlc/t3", ev)
	if _, err := d.Acquire(ctx, AcquireRequest{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.Revoke(ctx, clientv3.LeaseID(ev.last.Load())); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the keep-alive that learns of the revoke
	if ev.lost.Load() != 0 {
		t.Errorf("mutant-etcd-ignore-done reported lost")
	}
}
