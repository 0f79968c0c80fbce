package zksim

import (
	"errors"
	"pgregory.net/rapid"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"
)

// wireConn connects a go-zookeeper client through the simulator, inside the bubble.
func connectWire(t *testing.T, s *Sim, name string) (*Client, *zk.Conn) {
	t.Helper()
	c := s.NewWireClient(name)
	conn, _, err := zk.Connect([]string{WireAddress}, 10*time.Second, c.ZKOption(nil))
	if err != nil {
		t.Fatal(err)
	}
	s.Settle()
	return c, conn
}

// runAll runs c's pending requests until it has none.
func runAll(t *testing.T, s *Sim, c *Client) {
	t.Helper()
	for s.CanRun(c) {
		tr, err := s.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(tr)
	}
}

func TestWireCreateAndRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewWire()
		c, conn := connectWire(t, s, "c0")
		if st := s.Session(c); st.ID == 0 {
			t.Fatalf("no session after connect: %+v", st)
		}
		done := make(chan error, 1)
		var got string
		go func() {
			var err error
			got, err = conn.Create("/a", []byte("x"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			done <- err
		}()
		s.Settle()
		if p := s.Pending(c); p == "" {
			t.Fatal("no pending request")
		}
		runAll(t, s, c)
		if err := <-done; err != nil || got != "/a0000000000" {
			t.Fatalf("create = %q, %v", got, err)
		}
		for _, n := range s.TakeNotes() {
			t.Log(n)
		}
		closed := make(chan struct{})
		go func() { conn.Close(); close(closed) }()
		s.Settle()
		<-closed
		t.Log(s.TakeNotes())
		if len(s.Ephemerals()) != 0 {
			t.Fatalf("ephemerals left after close: %v", s.Ephemerals())
		}
	})
}

// goZKLock is go-zookeeper's own zk.Lock, unchanged, as a wire recipe: what a user's
// test of their go-zookeeper recipe looks like.
func goZKLock() Recipe {
	return Recipe{
		Name: "go-zookeeper zk.Lock",
		NewConn: func(env ConnEnv) (Locker, error) {
			conn, _, err := zk.Connect(env.Servers, 10*time.Second, env.Option())
			if err != nil {
				return nil, err
			}
			l := zk.NewLock(conn, env.Path, zk.WorldACL(zk.PermAll))
			return LockUnlock(conn, l.Lock, l.Unlock), nil
		},
		// A go-zookeeper user takes an error from Lock to mean "not locked", and
		// ErrNotLocked from Unlock to mean nothing was held.
		Definite: func(err error) bool {
			var oe *OpError
			return errors.As(err, &oe) && (oe.Op == "lock" || errors.Is(err, zk.ErrNotLocked))
		},
	}
}

// TestWireGoZKLockOrphan: go-zookeeper's zk.Lock, unchanged, talking the wire
// protocol to the simulator, leaves an orphan lock node (a node its own client then
// waits behind forever, or that is left over) within rapid's default checks, shrunk
// to a few steps.
func TestWireGoZKLockOrphan(t *testing.T) {
	t.Chdir(t.TempDir()) // rapid writes its fail files under ./testdata
	rec := &recorder{name: t.Name()}
	var last RunInfo
	start := time.Now()
	rapid.Check(rec, LockProperty(t, LockConfig{Recipe: goZKLock(), Without: []StepKind{StepExpire}}, func(ri RunInfo) { last = ri }))
	if !rec.failed {
		t.Fatal("zk.Lock passed every check")
	}
	checks := rec.checksBefore()
	if checks < 0 || last.Failure == nil {
		t.Fatalf("rapid's report: %q; last run %v", rec.errs, last.Failure)
	}
	if k := last.Failure.Kind; k != FailLiveness && k != FailOrphan {
		t.Errorf("zk.Lock broke %s, want liveness or orphan: %v", k, last.Failure)
	}
	t.Logf("rapid: %q", rec.errs)
	t.Logf("caught after %d passing checks in %v, shrunk to %d steps (%d clients): %v\n%s\n%s",
		checks, time.Since(start).Round(time.Millisecond), len(last.Schedule.Steps), last.Schedule.Clients,
		last.Failure, last.Schedule, strings.Join(last.Trace(), "\n"))
}
