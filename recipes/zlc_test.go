package recipes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// These tests need a ZooKeeper; they run only when ZLC_ZK_CONNECT names one.

func newTestZLC(t *testing.T, name string, servers []string, cfg Config) (*zlcRecipe, *recordedEvents) {
	t.Helper()
	ev := newRecordedEvents()
	cfg.Servers, cfg.Events, cfg.Log = servers, ev, newTestLog(t)
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 2 * time.Second
	}
	if cfg.Kind == "" {
		cfg.Kind = workloads.Mutex
	}
	newRecipe, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRecipe(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*zlcRecipe), ev
}

func TestZLCMutualExclusionTimeoutAndRelease(t *testing.T) {
	servers := zkServers(t)
	path := testLockPath(t)
	ctx := context.Background()
	a, _ := newTestZLC(t, "zlc-mutex", servers, Config{Path: path, Worker: 1})
	b, bEvents := newTestZLC(t, "zlc-mutex", servers, Config{Path: path, Worker: 2})
	raw := rawConn(t, servers)

	ga, err := a.Acquire(ctx, AcquireRequest{Timeout: 2 * time.Second})
	expectOutcome(t, "a acquire", err, workloads.ReplyOK, "")
	start := time.Now()
	_, err = b.Acquire(ctx, AcquireRequest{Timeout: 300 * time.Millisecond})
	expectOutcome(t, "b acquire while a holds", err, workloads.ReplyFail, "timeout")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("b's timed-out acquire took %v", d)
	}
	children, _, err := raw.Children(path)
	if err != nil || len(children) != 1 {
		t.Fatalf("children after b's timeout = %v, %v; want only a's node", children, err)
	}
	if _, n := bEvents.counts(); n != 1 {
		t.Errorf("b reported %d sessions, want 1 (a timeout keeps the session)", n)
	}

	expectOutcome(t, "a release", a.Release(ctx), workloads.ReplyOK, "")
	expectOutcome(t, "a release again", a.Release(ctx), workloads.ReplyFail, "not held")
	gb, err := b.Acquire(ctx, AcquireRequest{Timeout: 2 * time.Second})
	expectOutcome(t, "b acquire after a released", err, workloads.ReplyOK, "")
	if token(t, gb) <= token(t, ga) {
		t.Errorf("b's token %s is not above a's %s", gb.Token, ga.Token)
	}
	_, err = b.Acquire(ctx, AcquireRequest{Timeout: time.Second})
	expectOutcome(t, "b acquire twice", err, workloads.ReplyFail, zlcmutex.ErrAlreadyHeld.Error())

	// Someone else deletes b's node: the release finds it gone.
	children, _, err = raw.Children(path)
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v", children, err)
	}
	if err := raw.Delete(path+"/"+children[0], -1); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, "b release of a deleted node", b.Release(ctx), workloads.ReplyFail, "not held: the lock node was already gone")
}

// TestZLCWorkersExcludeEachOther: two zlc-mutex clients hammer one lock; their
// critical sections never overlap and both make progress.
func TestZLCWorkersExcludeEachOther(t *testing.T) {
	servers := zkServers(t)
	path := testLockPath(t)
	var inside atomic.Int32
	var overlaps atomic.Int32
	var wg sync.WaitGroup
	for w := 1; w <= 2; w++ {
		r, _ := newTestZLC(t, "zlc-mutex", servers, Config{Path: path, Worker: w})
		wg.Go(func() {
			for i := 0; i < 25; i++ {
				_, err := r.Acquire(context.Background(), AcquireRequest{Timeout: 5 * time.Second})
				if typ, msg := Classify(err); typ != workloads.ReplyOK {
					t.Errorf("worker %d acquire %d: %s %s", w, i, typ, msg)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := r.Release(context.Background()); err != nil {
					t.Errorf("worker %d release %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
}

func TestZLCCounterFenced(t *testing.T) {
	servers := zkServers(t)
	path := testLockPath(t)
	counter := strings.TrimSuffix(path, "/l0") + "/counter"
	ctx := context.Background()
	a, aEvents := newTestZLC(t, "zlc-mutex", servers, Config{Path: path, Kind: workloads.Counter, CounterPath: counter, Fenced: true, Worker: 1})
	u, _ := newTestZLC(t, "zlc-mutex", servers, Config{Path: path, Kind: workloads.Counter, CounterPath: counter, Worker: 2})
	raw := rawConn(t, servers)
	testCounterFenced(t, a, u, aEvents, raw.Delete, path)
	expectOutcome(t, "a release after its node was deleted", a.Release(ctx), workloads.ReplyFail, "not held: the lock was lost")
	_, err := a.Acquire(ctx, AcquireRequest{Timeout: 2 * time.Second})
	expectOutcome(t, "a acquire again", err, workloads.ReplyOK, "")
	expectOutcome(t, "a fenced write", a.Write(ctx, 12), workloads.ReplyOK, "")
}

func TestGoZKCounterFenced(t *testing.T) {
	servers := zkServers(t)
	path := testLockPath(t)
	counter := strings.TrimSuffix(path, "/l0") + "/counter"
	a, aEvents := newTestGoZK(t, servers, path, 1)
	a.cfg.Kind, a.cfg.CounterPath, a.cfg.Fenced = workloads.Counter, counter, true
	u, _ := newTestGoZK(t, servers, path, 2)
	u.cfg.Kind, u.cfg.CounterPath = workloads.Counter, counter
	raw := rawConn(t, servers)
	testCounterFenced(t, a, u, aEvents, raw.Delete, path)
}

// counterRecipe is a recipe with the counter workload.
type counterRecipe interface {
	Recipe
	Counter
}

// testCounterFenced: read of a missing counter, fenced and unfenced writes, and a
// fenced write refused after the lock node was deleted behind the holder's back.
func testCounterFenced(t *testing.T, a, u counterRecipe, aEvents *recordedEvents, del func(string, int32) error, path string) {
	t.Helper()
	ctx := context.Background()
	if v, err := u.Read(ctx); err != nil || v != 0 {
		t.Fatalf("read of a missing counter = %d, %v; want 0", v, err)
	}
	expectOutcome(t, "fenced write without the lock", a.Write(ctx, 1), workloads.ReplyFail, "fenced: lock node gone")
	_, err := a.Acquire(ctx, AcquireRequest{Timeout: 2 * time.Second})
	expectOutcome(t, "a acquire", err, workloads.ReplyOK, "")
	expectOutcome(t, "fenced write while holding", a.Write(ctx, 5), workloads.ReplyOK, "")
	if v, err := a.Read(ctx); err != nil || v != 5 {
		t.Fatalf("read = %d, %v; want 5", v, err)
	}
	children, _, err := rawChildren(t, path)
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v", children, err)
	}
	if err := del(path+"/"+children[0], -1); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, "fenced write after the node was deleted", a.Write(ctx, 6), workloads.ReplyFail, "fenced: lock node gone")
	if v, err := a.Read(ctx); err != nil || v != 5 {
		t.Fatalf("read after the refused write = %d, %v; want 5", v, err)
	}
	expectOutcome(t, "unfenced write without the lock", u.Write(ctx, 9), workloads.ReplyOK, "")
	if v, err := a.Read(ctx); err != nil || v != 9 {
		t.Fatalf("read = %d, %v; want 9", v, err)
	}
	if n, _ := aEvents.counts(); n > 1 {
		t.Errorf("%d lost events", n)
	}
}

func rawChildren(t *testing.T, path string) ([]string, any, error) {
	t.Helper()
	c, _, err := rawConn(t, zkServers(t)).Children(path)
	return c, nil, err
}

func TestServeZLCCounterOverPipes(t *testing.T) {
	servers := zkServers(t)
	path := testLockPath(t)
	counter := strings.TrimSuffix(path, "/l0") + "/counter"
	w := startWorker(t, context.Background(), ServeConfig{Recipe: "zlc-mutex"})
	w.send(fmt.Sprintf(`{"id":0,"op":"init","connect":%q,"session_timeout_ms":2000,"path":%q,"kind":"counter","counter_path":%q,"fenced":true,"worker":1}`,
		strings.Join(servers, ","), path, counter))
	if m := w.next(); m.Event != workloads.EventSession || !strings.HasPrefix(m.SessionID, "0x") || m.Passwd == "" {
		t.Fatalf("first line %+v, want a session event with a password", m)
	}
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"acquire","timeout_ms":2000}`)
	if m := w.expectReply(1, "ok", ""); len(m.Token) == 0 {
		t.Error("acquire reply has no token")
	}
	w.send(`{"id":2,"op":"read"}`)
	if m := w.expectReply(2, "ok", ""); m.Value == nil || *m.Value != 0 {
		t.Fatalf("read = %v, want 0", m.Value)
	}
	w.send(`{"id":3,"op":"write","value":1}`)
	w.expectReply(3, "ok", "")
	w.send(`{"id":4,"op":"read"}`)
	if m := w.expectReply(4, "ok", ""); m.Value == nil || *m.Value != 1 {
		t.Fatalf("read = %v, want 1", m.Value)
	}
	w.send(`{"id":5,"op":"release"}`)
	w.expectReply(5, "ok", "")
	w.send(`{"id":6,"op":"close"}`)
	w.expectReply(6, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.log.String(), "zlc-mutex[1]") {
		t.Errorf("no client log on stderr: %s", w.log.String())
	}
}

// TestZLCLostOnDisconnect: a holder cut off from ZooKeeper reports lost as soon as
// its connection drops, before its session expires and another client acquires;
// mutant-ignore-lost stays silent while the other client takes the lock.
func TestZLCLostOnDisconnect(t *testing.T) {
	servers := zkServers(t)
	for _, name := range []string{"zlc-mutex", "mutant-ignore-lost"} {
		t.Run(name, func(t *testing.T) {
			path := testLockPath(t)
			ctx := context.Background()
			px := startProxy(t, servers[0])
			a, aEvents := newTestZLC(t, name, []string{px.ln.Addr().String()}, Config{Path: path, Worker: 1})
			c, _ := newTestZLC(t, "zlc-mutex", servers, Config{Path: path, Worker: 3})
			_, err := a.Acquire(ctx, AcquireRequest{Timeout: 2 * time.Second})
			expectOutcome(t, "a acquire", err, workloads.ReplyOK, "")

			px.setCut(true)
			start := time.Now()
			cch := make(chan error, 1)
			go func() {
				_, err := c.Acquire(ctx, AcquireRequest{Timeout: 20 * time.Second})
				cch <- err
			}()
			var cErr error
			select {
			case cErr = <-cch:
			case <-time.After(30 * time.Second):
				t.Fatal("c never acquired")
			}
			expectOutcome(t, "c acquire", cErr, workloads.ReplyOK, "")
			lostBefore, _ := aEvents.counts()
			t.Logf("c acquired %v after the cut; a had reported %d lost events by then", time.Since(start), lostBefore)
			switch {
			case name == "zlc-mutex" && lostBefore != 1:
				t.Fatalf("a reported %d lost events before c acquired, want 1", lostBefore)
			case name == "mutant-ignore-lost":
				old, _ := a.client.Session()
				px.setCut(false)
				// a reconnects, learns its session expired and gets a new one.
				deadline := time.Now().Add(20 * time.Second)
				for s, _ := a.client.Session(); s.State != zlcmutex.StateConnected || s.ID == old.ID; s, _ = a.client.Session() {
					if time.Now().After(deadline) {
						t.Fatalf("a has no new session: %+v", s)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if n, _ := aEvents.counts(); n != 0 {
					t.Fatalf("the mutant reported lost")
				}
				expectOutcome(t, "the mutant's release after expiry", a.Release(ctx), workloads.ReplyFail, "not held: the lock node was already gone")
			}
		})
	}
}
