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

// etcdLock is an etcd recipe of the catalogue under test: a lock with a counter.
type etcdLock interface {
	Recipe
	Counter
}

// newEtcdLock builds the catalogue's recipe name on s, as a worker would.
func newEtcdLock(t *testing.T, s *etcdServer, name, path string, ev *recordingEvents) etcdLock {
	t.Helper()
	e, err := Find(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.New(context.Background(), Config{Servers: []string{s.addr}, SessionTimeout: 2 * time.Second, Path: path,
		Kind: workloads.Counter, CounterPath: path + "-counter", Fenced: true, Events: ev, Worker: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(etcdLock)
}

// etcdClientOf is the client of an etcd recipe of this package.
func etcdClientOf(r Recipe) *clientv3.Client {
	if e, ok := r.(*etcdElection); ok {
		return e.client
	}
	return r.(*etcdMutex).client
}

// TestEtcdMutex: for etcd-mutex, etcd-election (a leadership term as a hold) and
// etcd-mutex-trylock alike, grants in turn with growing create revisions as tokens, a
// timed-out acquire that leaves no key, lost when the session's lease is revoked, a
// fenced write refused after it, and a new session for the next acquire; then, for
// the two that queue, the failures each must clean up after (etcdFailures).
func TestEtcdMutex(t *testing.T) {
	s := startEtcd(t)
	for _, name := range []string{"etcd-mutex", "etcd-election", "etcd-mutex-trylock"} {
		t.Run(name, func(t *testing.T) {
			path := "/zlc/t1-" + name
			ev1, ev2 := &recordingEvents{}, &recordingEvents{}
			a, b := newEtcdLock(t, s, name, path, ev1), newEtcdLock(t, s, name, path, ev2)
			etcdTurns(t, s, path, a, b, ev1, ev2)
			if name != "etcd-mutex-trylock" { // its waiters hold no key to fail with
				etcdFailures(t, s, name, path, a, b, ev2)
			}
		})
	}
}

// etcdTurns is TestEtcdMutex's first part, on a fresh lock at path.
func etcdTurns(t *testing.T, s *etcdServer, path string, a, b etcdLock, ev1, ev2 *recordingEvents) {
	ctx := context.Background()
	g1, err := a.Acquire(ctx, AcquireRequest{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if g1.Lock == nil || g1.Lock.Session != fmt.Sprintf("0x%x", ev1.last.Load()) || len(g1.Lock.Keys) != 1 || !strings.HasPrefix(g1.Lock.Keys[0], path+"/") {
		t.Errorf("grant's place = %+v", g1.Lock)
	}
	start := time.Now()
	_, err = b.Acquire(ctx, AcquireRequest{Timeout: 300 * time.Millisecond})
	if o, _ := Classify(err); o != workloads.ReplyFail || !errors.Is(err, ErrTimeout) || time.Since(start) > 2*time.Second {
		t.Fatalf("acquire of a held lock: %v after %s, want a timeout fail", err, time.Since(start))
	}
	if n := etcdKeys(t, s, path); n != 1 {
		t.Errorf("keys under the lock after the timeout: %d; want the holder's only", n)
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
	if etcdToken(t, g2) <= etcdToken(t, g1) {
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
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// etcdFailures is TestEtcdMutex's second part, once b holds nothing: a release whose
// outcome is unknown, a waiter whose lease ends while it waits, a waiter (a new
// recipe of name) whose watch is lost. Each acquire must fail or grant as a lock does, with no key left behind
// and no token repeated.
func etcdFailures(t *testing.T, s *etcdServer, name, path string, a, b etcdLock, evb *recordingEvents) {
	ctx := context.Background()
	// A release that cannot be sent (outcome unknown to the recipe) leaves the key:
	// the next acquire deletes it first, so its token is new (Lock and Campaign
	// would otherwise take the session's key back with its old revision).
	g1, err := a.Acquire(ctx, AcquireRequest{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if o, _ := Classify(a.Release(gone)); o != workloads.ReplyInfo {
		t.Fatalf("release that was not sent: %s, want info", o)
	}
	g2, err := a.Acquire(ctx, AcquireRequest{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if etcdToken(t, g2) <= etcdToken(t, g1) {
		t.Errorf("after a release of unknown outcome: token %s then %s, want a new create revision", g1.Token, g2.Token)
	}
	// A waiter whose lease the servers end while it waits is not granted when the
	// holder goes (Campaign returns nil then: the read back must refuse it).
	waiting := etcdAcquireAsync(b)
	etcdWaitKeys(t, s, path, 2)
	if _, err := s.admin.Revoke(ctx, clientv3.LeaseID(evb.last.Load())); err != nil {
		t.Fatal(err)
	}
	etcdWaitKeys(t, s, path, 1)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err == nil {
		t.Fatal("a waiter whose lease ended was granted")
	} else if o, _ := Classify(err); o != workloads.ReplyFail || errors.Is(err, ErrTimeout) {
		t.Errorf("a waiter whose lease ended: %s %v, want a fail before its timeout", o, err)
	}
	// A waiter whose watch is lost (the channel closes with no error: Lock cleans up
	// its key then, Campaign does not) leaves no key behind. (A new waiter: b's
	// revoked session may not have noticed yet.)
	if _, err := a.Acquire(ctx, AcquireRequest{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	c := newEtcdLock(t, s, name, path, &recordingEvents{})
	waiting = etcdAcquireAsync(c)
	etcdWaitKeys(t, s, path, 2)
	etcdClientOf(c).Watcher.Close()
	if o, msg := Classify(<-waiting); o != workloads.ReplyFail {
		t.Errorf("a waiter whose watch was lost: %s %s, want fail", o, msg)
	}
	if n := etcdKeys(t, s, path); n != 1 {
		t.Errorf("keys under the lock after a lost watch: %d, want the holder's only", n)
	}
}

// etcdAcquireAsync starts r's acquire (5 s timeout) and returns its error's channel.
func etcdAcquireAsync(r Recipe) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := r.Acquire(context.Background(), AcquireRequest{Timeout: 5 * time.Second})
		ch <- err
	}()
	return ch
}

// etcdKeys counts the keys under the lock at path.
func etcdKeys(t *testing.T, s *etcdServer, path string) int64 {
	t.Helper()
	resp, err := s.admin.Get(context.Background(), path+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// etcdWaitKeys waits until the lock at path has n keys.
func etcdWaitKeys(t *testing.T, s *etcdServer, path string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); etcdKeys(t, s, path) != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lock at %s has %d keys, want %d", path, etcdKeys(t, s, path), n)
		}
	}
}

// etcdToken is a grant's token, a create revision.
func etcdToken(t *testing.T, g Grant) int64 {
	t.Helper()
	var rev int64
	if err := json.Unmarshal(g.Token, &rev); err != nil {
		t.Fatalf("token %s: %v", g.Token, err)
	}
	return rev
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
