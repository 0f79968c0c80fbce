package zksim

import (
	"context"
	"errors"
	"flag"
	"github.com/zlockcheck/zlockcheck/internal/rapidrec"
	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"math/rand/v2"
	"pgregory.net/rapid"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
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
	shrinkFor(t, 8*time.Second)
	rec := rapidrec.New(t.Name())
	var last RunInfo
	start := time.Now()
	var record simsched.Record[StepKind]
	rapid.Check(rec, property(LockConfig{Recipe: goZKLock(), Without: []StepKind{StepExpire}}).CheckRecorded(t, &record, func(ri RunInfo) { last = ri }))
	if !rec.Failed() {
		t.Fatal("zk.Lock passed every check")
	}
	checks := rec.ChecksBefore()
	if checks < 0 || last.Failure == nil {
		t.Fatalf("rapid's report: %q; last run %v", rec.Errs(), last.Failure)
	}
	if k := last.Failure.Kind; k != FailLiveness && k != FailOrphan {
		t.Errorf("zk.Lock broke %s, want liveness or orphan: %v", k, last.Failure)
	}
	if checks >= 100 {
		t.Errorf("found after %d checks, want within rapid's default 100", checks)
	}
	// Rapid's fail file replays the shrunk counterexample first thing, exactly.
	shrunk := last
	again := rapidrec.New(t.Name())
	rapid.Check(again, LockProperty(t, LockConfig{Recipe: goZKLock(), Without: []StepKind{StepExpire}}, func(ri RunInfo) { last = ri }))
	if n := again.ChecksBefore(); n != 0 || last.Failure == nil || last.Failure.Msg != shrunk.Failure.Msg ||
		last.Schedule.String() != shrunk.Schedule.String() {
		t.Errorf("replaying the fail file: failed after %d checks with\n%s%v\nwant\n%s%v", n, last.Schedule, last.Failure, shrunk.Schedule, shrunk.Failure)
	}
	t.Logf("caught after %d passing checks in %v, shrunk to %d steps (%d clients): %v\n%s\n%s",
		checks, time.Since(start).Round(time.Millisecond), len(last.Schedule.Steps), last.Schedule.Clients,
		last.Failure, last.Schedule, strings.Join(last.Trace(), "\n"))
	checkMinimized(t, LockConfig{Recipe: goZKLock(), Without: []StepKind{StepExpire}}, &record, shrunk, time.Since(start) >= rapidrec.ShrinkTime(t))
}

// TestWireZLCMutex checks zlc-mutex over the wire (the real zlcmutex.ZKClient on
// go-zookeeper) with rapid's checks: it must pass as it does in process.
func TestWireZLCMutex(t *testing.T) {
	CheckLock(t, LockConfig{Recipe: ZLCMutexWire(zlcmutex.MutantNone)})
}

// coinLock is zlc-mutex whose acquire, the first time each process tries, fails or
// not by a coin the simulation does not control (the global random source): a
// recipe that is not deterministic under the simulator.
func coinLock() Recipe {
	r := ZLCMutex(zlcmutex.MutantNone)
	inner := r.New
	r.Name = "coin-flipping zlc-mutex"
	r.New = func(env LockEnv) (Locker, error) {
		l, err := inner(env)
		return &coinLocker{Locker: l}, err
	}
	r.Definite = func(err error) bool { return errors.Is(err, errCoin) || zlcmutex.Definite(err) }
	return r
}

var errCoin = errors.New("the coin said no")

type coinLocker struct {
	Locker
	tossed bool
}

func (c *coinLocker) Acquire(ctx context.Context) (Hold, error) {
	if !c.tossed {
		c.tossed = true
		if rand.IntN(2) == 0 {
			return Hold{}, errCoin
		}
	}
	return c.Locker.Acquire(ctx)
}

// TestDivergenceIsReported: a run of a recipe that is not deterministic is told
// apart from its replays (the check LockProperty makes before rapid shrinks a
// failure), and a deterministic one's is not.
func TestDivergenceIsReported(t *testing.T) {
	steps := []Step{{Kind: StepAcquire, Target: 0}, {Kind: StepAcquire, Target: 1}, {Kind: StepAcquire, Target: 2}}
	sched := Schedule{Clients: 3, Steps: steps}
	diverged := 0
	for range 10 {
		ri, err := ReplayLock(t, LockConfig{Recipe: coinLock()}, sched)
		if err != nil {
			t.Fatal(err)
		}
		if d := divergence(t, LockConfig{Recipe: coinLock()}, ri); d != "" {
			diverged++
			if !strings.Contains(d, "diverged at trace line") {
				t.Fatalf("divergence = %q", d)
			}
		}
	}
	// Each check compares with two replays of three coins each: the chance that all
	// ten agree is 2^-60.
	if diverged == 0 {
		t.Fatal("no divergence found in 10 runs of a coin-flipping recipe")
	}
	for _, r := range []Recipe{ZLCMutex(zlcmutex.MutantNone), goZKLock()} {
		ri, err := ReplayLock(t, LockConfig{Recipe: r}, sched)
		if err != nil {
			t.Fatal(err)
		}
		if d := divergence(t, LockConfig{Recipe: r}, ri); d != "" {
			t.Errorf("%s: %s", r.Name, d)
		}
	}
}

// TestWireHarnessGoZK: the harness's own gozk recipe (recipes.NewGoZK: zk.Lock as a
// go-zookeeper user runs it, reporting a lost session when go-zookeeper says it
// expired), unchanged over the wire. Its holder is not told when it is cut off, so
// when its session expires before it reconnects, another client takes the lock while
// it still believes it holds: the history has two holders, as the real harness finds
// under client partitions (its acquire errors are info, so a client that hit the
// orphan is retired, and the orphan goes with its session).
func TestWireHarnessGoZK(t *testing.T) {
	t.Chdir(t.TempDir())
	shrinkFor(t, 8*time.Second)
	// The window needs a drop and an expiry of the holder's session, in that order,
	// before it reconnects: the faults are left to those two, and rapid gets up to 20
	// rounds of its 100 checks (it took 5 to 250 checks in ten tries; a round that
	// finds nothing takes half a second). The shrunk schedule is kept in
	// testdata/schedules/wire-gozk-zombie.txt.
	cfg := LockConfig{
		Recipe:  HarnessRecipe("gozk", recipes.NewGoZK, 10*time.Second),
		Without: []StepKind{StepCrash, StepLoseReply},
	}
	rec := rapidrec.New(t.Name())
	var last RunInfo
	for round := 0; round < 20 && (!rec.Failed() || last.Failure == nil); round++ {
		if rec.Failed() {
			// A round that ended with no verdict (rapid's "invalid data: overrun", once
			// in a make test under load) is no finding: the next round starts afresh.
			t.Logf("round %d gave no verdict: %q", round, rec.Errs())
			rec, last = rapidrec.New(t.Name()), RunInfo{}
		}
		rapid.Check(rec, LockProperty(t, cfg, func(ri RunInfo) { last = ri }))
	}
	if !rec.Failed() || last.Failure == nil {
		t.Fatalf("gozk passed every check: %q", rec.Errs())
	}
	if k := last.Failure.Kind; k != FailModel && k != FailExclusion {
		t.Fatalf("gozk broke %s, want the history check or mutual exclusion: %v", k, last.Failure)
	}
	t.Logf("caught after %d passing checks, shrunk to %d steps: %v\n%s\n%s", rec.ChecksBefore(),
		len(last.Schedule.Steps), last.Failure, last.Schedule, strings.Join(last.Trace(), "\n"))
}

// shrinkFor sets rapid's -rapid.shrinktime to d for this test, unless it was set on
// the command line: a wire run costs ten times an in-process one, and rapid's default
// (30 s) would make a test of a few hundred schedules spend half a minute shrinking.
func shrinkFor(t *testing.T, d time.Duration) {
	f := flag.Lookup("rapid.shrinktime")
	if f == nil || f.Value.String() != f.DefValue {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(d.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestWireRaceMutantsAreCaught: the two fault-free race mutants of zlc-mutex (a
// predecessor gone between getChildren and exists; a given-up acquire's watch fired
// between acquires) are caught over the wire too. Over the wire they took 15-53
// passing checks (2026-11-28), near rapid's default 100, so the test allows three
// rounds of checks before it calls the mutant missed.
func TestWireRaceMutantsAreCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("-short cuts rapid's checks to 20 a round; these mutants need the defaults")
	}
	for _, m := range []zlcmutex.Mutant{zlcmutex.MutantMissedWakeup, zlcmutex.MutantWithdrawnWatch} {
		t.Run(m.String(), func(t *testing.T) {
			t.Chdir(t.TempDir())
			shrinkFor(t, 4*time.Second)
			rec, last := checkUntilVerdict(t, LockConfig{Recipe: ZLCMutexWire(m)}, 3)
			if !rec.Failed() || last.Failure == nil {
				t.Fatalf("%s passed three rounds of checks over the wire: %q", m, rec.Errs())
			}
			if !slices.Contains(caught[m], last.Failure.Kind) {
				t.Errorf("%s broke %s, want one of %q: %v", m, last.Failure.Kind, caught[m], last.Failure)
			}
			t.Logf("caught after %d passing checks, shrunk to %d steps: %v", rec.ChecksBefore(), len(last.Schedule.Steps), last.Failure)
		})
	}
}
