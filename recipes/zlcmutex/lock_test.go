package zlcmutex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	lockPath    = "/locks/l0"
	counterPath = "/locks/counter"
	// testWait bounds what must happen; quiet is how long a test watches for
	// something that must not happen.
	testWait = 5 * time.Second
	quiet    = 150 * time.Millisecond
)

// testLogf sends log lines to t.Log until the test ends (monitors may outlive it).
func testLogf(t *testing.T, prefix string) func(string, ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf("%s: %s", prefix, fmt.Sprintf(format, args...))
		}
	}
}

// inst is one lock client: a fake client (its own session) and a Lock.
type inst struct {
	t    *testing.T
	name string
	c    *fakeClient
	l    *Lock
	lost chan string
}

func newInst(t *testing.T, z *fakeZK, name string, m Mutant, edit ...func(*Config)) *inst {
	t.Helper()
	in := &inst{t: t, name: name, c: z.client(), lost: make(chan string, 10)}
	cfg := Config{
		Client: in.c, Path: lockPath, CounterPath: counterPath, Mutant: m,
		OnLost: func(reason string) { in.lost <- reason },
		Logf:   testLogf(t, name), Retry: time.Millisecond,
	}
	for _, e := range edit {
		e(&cfg)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in.l = l
	t.Cleanup(l.Close)
	return in
}

func (in *inst) mustAcquire() Grant {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	g, err := in.l.Acquire(ctx)
	if err != nil {
		in.t.Fatalf("%s: acquire: %v", in.name, err)
	}
	return g
}

type acquired struct {
	g   Grant
	err error
}

// acquireAsync starts an acquire that gives up (with cause ErrTimeout) when the
// returned cancel is called.
func (in *inst) acquireAsync() (<-chan acquired, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan acquired, 1)
	go func() {
		g, err := in.l.Acquire(ctx)
		ch <- acquired{g, err}
	}()
	in.t.Cleanup(func() { cancel(nil) })
	return ch, func() { cancel(ErrTimeout) }
}

func wait(t *testing.T, ch <-chan acquired, what string) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testWait):
		t.Fatalf("%s: no result", what)
	}
	return acquired{}
}

// stillWaiting checks that the acquire has not returned for a while.
func stillWaiting(t *testing.T, ch <-chan acquired, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned %+v, %v; want it still waiting", what, r.g, r.err)
	case <-time.After(quiet):
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func expectTimeout(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrTimeout) || !Definite(err) || err.Error() != "timeout" {
		t.Fatalf("%s: %v (definite %v), want a definite timeout", what, err, Definite(err))
	}
}

// queue lists the lock nodes in queue order.
func queue(t *testing.T, z *fakeZK) []string {
	t.Helper()
	names, err := z.children(lockPath)
	if errors.Is(err, ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return sortQueue(names)
}

// owned lists the lock nodes of session id.
func owned(t *testing.T, z *fakeZK, id int64) []string {
	var out []string
	for _, n := range queue(t, z) {
		if z.owner(lockPath+"/"+n) == id {
			out = append(out, n)
		}
	}
	return out
}

func sessionID(c *fakeClient) int64 {
	s, _ := c.Session()
	return s.ID
}

func exists(z *fakeZK, p string) bool { return z.owner(p) != -1 }

// both runs a scenario for zlc-mutex and for the mutant whose bug it shows.
func both(t *testing.T, m Mutant, scenario func(t *testing.T, m Mutant, buggy bool)) {
	for _, mm := range []Mutant{MutantNone, m} {
		t.Run(mm.String(), func(t *testing.T) { scenario(t, mm, mm != MutantNone) })
	}
}

func TestHandoffTokensAndErrors(t *testing.T) {
	z := newFakeZK()
	a := newInst(t, z, "a", MutantNone)
	b := newInst(t, z, "b", MutantNone)

	ga := a.mustAcquire()
	if _, err := a.l.Acquire(context.Background()); !errors.Is(err, ErrAlreadyHeld) || !Definite(err) {
		t.Fatalf("second acquire: %v, want a definite ErrAlreadyHeld", err)
	}
	bch, _ := b.acquireAsync()
	stillWaiting(t, bch, "b's acquire while a holds")
	if len(queue(t, z)) != 2 {
		t.Fatalf("queue %v, want a's and b's nodes", queue(t, z))
	}
	if err := a.l.Release(); err != nil {
		t.Fatalf("a release: %v", err)
	}
	if err := a.l.Release(); !errors.Is(err, ErrNotHeld) || !Definite(err) {
		t.Fatalf("a release again: %v, want a definite ErrNotHeld", err)
	}
	r := wait(t, bch, "b's acquire after a released")
	if r.err != nil {
		t.Fatalf("b acquire: %v", r.err)
	}
	if r.g.Token <= ga.Token {
		t.Errorf("b's token %d is not above a's %d", r.g.Token, ga.Token)
	}
	if got := z.owner(r.g.Node); got != sessionID(b.c) {
		t.Errorf("b's node is owned by 0x%x, want b's session 0x%x", got, sessionID(b.c))
	}
}

// TestOffByOne: with one holder, a second acquire must time out; the mutant grants it.
func TestOffByOne(t *testing.T) {
	both(t, MutantOffByOne, func(t *testing.T, m Mutant, buggy bool) {
		z := newFakeZK()
		a := newInst(t, z, "a", m)
		b := newInst(t, z, "b", m)
		a.mustAcquire()
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		defer cancel()
		g, err := b.l.Acquire(ctx)
		if buggy {
			if err != nil {
				t.Fatalf("b acquire: %v; the mutant should grant the second node", err)
			}
			t.Logf("both hold: a and b (%s)", g.Node)
			return
		}
		expectTimeout(t, "b acquire while a holds", err)
		if q := queue(t, z); len(q) != 1 {
			t.Errorf("queue after b's timeout = %v, want only a's node", q)
		}
	})
}

// TestDeleteLowest: a waiter that times out must delete its own node; the mutant
// deletes the holder's, and once the mutant's orphan is gone a third client gets
// the lock while the first still holds it.
func TestDeleteLowest(t *testing.T) {
	both(t, MutantDeleteLowest, func(t *testing.T, m Mutant, buggy bool) {
		z := newFakeZK()
		a := newInst(t, z, "a", m)
		b := newInst(t, z, "b", m)
		c := newInst(t, z, "c", m)
		ga := a.mustAcquire()
		bch, giveUp := b.acquireAsync()
		eventually(t, "b waits behind a", func() bool { return z.watchers(ga.Node) == 1 })
		giveUp()
		expectTimeout(t, "b's acquire", wait(t, bch, "b's acquire").err)
		if !buggy {
			if !exists(z, ga.Node) || len(owned(t, z, sessionID(b.c))) != 0 {
				t.Fatalf("queue after b's timeout = %v, want a's node only", queue(t, z))
			}
			return
		}
		if exists(z, ga.Node) {
			t.Fatal("the mutant left the holder's node alone")
		}
		t.Logf("after b's timeout the holder's node is gone; queue %v", queue(t, z))
		if len(owned(t, z, sessionID(b.c))) != 1 {
			t.Fatalf("queue %v, want b's own (forgotten) node", queue(t, z))
		}
		b.c.expire() // b's orphan goes with its session
		gc := c.mustAcquire()
		if len(a.lost) != 0 {
			t.Fatal("a was told it lost the lock")
		}
		t.Logf("c holds %s while a still believes it holds %s", gc.Node, ga.Node)
	})
}

// TestUnprotectedCreate: a create whose reply is lost. zlc-mutex finds its node by
// its GUID and acquires; the mutant creates a second node of the same session, waits
// behind its own orphan and deadlocks everyone.
func TestUnprotectedCreate(t *testing.T) {
	both(t, MutantUnprotectedCreate, func(t *testing.T, m Mutant, buggy bool) {
		z := newFakeZK()
		b := newInst(t, z, "b", m)
		c := newInst(t, z, "c", m)
		lose := true
		b.c.hook = func(op, path string) fault {
			if op == "Create" && strings.HasPrefix(path, lockPath+"/") && lose {
				lose = false
				return faultLoseReply
			}
			return faultNone
		}
		bch, giveUp := b.acquireAsync()
		if !buggy {
			r := wait(t, bch, "b's acquire")
			if r.err != nil {
				t.Fatalf("b acquire: %v", r.err)
			}
			if q := queue(t, z); len(q) != 1 || lockPath+"/"+q[0] != r.g.Node {
				t.Fatalf("queue %v, want b's one node %s", q, r.g.Node)
			}
			return
		}
		eventually(t, "two nodes of b's session", func() bool { return len(owned(t, z, sessionID(b.c))) == 2 })
		t.Logf("a lost create reply left two nodes of one session: %v", queue(t, z))
		stillWaiting(t, bch, "b's acquire with nobody else around")
		giveUp()
		expectTimeout(t, "b's acquire", wait(t, bch, "b's acquire").err)
		if n := len(owned(t, z, sessionID(b.c))); n != 1 {
			t.Fatalf("b's session owns %d nodes after its timeout, want the orphan", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		defer cancel()
		_, err := c.l.Acquire(ctx)
		expectTimeout(t, "c's acquire of a lock nobody holds", err)
	})
}

// TestNoRecheck: a holds, b waits behind a, c behind b. When b gives up, c's watch
// fires although a still holds: zlc-mutex reads the queue again and waits on a; the
// mutant takes the lock.
func TestNoRecheck(t *testing.T) {
	both(t, MutantNoRecheck, func(t *testing.T, m Mutant, buggy bool) {
		z := newFakeZK()
		a := newInst(t, z, "a", m)
		b := newInst(t, z, "b", m)
		c := newInst(t, z, "c", m)
		ga := a.mustAcquire()
		bch, giveUpB := b.acquireAsync()
		eventually(t, "b waits behind a", func() bool { return z.watchers(ga.Node) == 1 })
		bNode := lockPath + "/" + queue(t, z)[1]
		cch, _ := c.acquireAsync()
		eventually(t, "c waits behind b", func() bool { return z.watchers(bNode) == 1 })
		giveUpB()
		expectTimeout(t, "b's acquire", wait(t, bch, "b's acquire").err)
		if buggy {
			r := wait(t, cch, "c's acquire")
			if r.err != nil {
				t.Fatalf("c acquire: %v", r.err)
			}
			if !exists(z, ga.Node) {
				t.Fatal("a's node is gone")
			}
			t.Logf("c holds %s while a holds %s", r.g.Node, ga.Node)
			return
		}
		stillWaiting(t, cch, "c's acquire while a holds")
		if err := a.l.Release(); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, cch, "c's acquire after a released"); r.err != nil {
			t.Fatalf("c acquire: %v", r.err)
		}
	})
}

// TestIgnoreLost: zlc-mutex reports lost on a disconnect and on an expiry while
// holding; the mutant says nothing.
func TestIgnoreLost(t *testing.T) {
	for _, how := range []string{"expiry", "disconnect"} {
		t.Run(how, func(t *testing.T) {
			both(t, MutantIgnoreLost, func(t *testing.T, m Mutant, buggy bool) {
				z := newFakeZK()
				a := newInst(t, z, "a", m)
				b := newInst(t, z, "b", m)
				ga := a.mustAcquire()
				want := "session expired"
				if how == "expiry" {
					a.c.expire()
				} else {
					a.c.disconnect()
					want = "connection lost while holding"
				}
				select {
				case reason := <-a.lost:
					if buggy {
						t.Fatalf("the mutant reported lost: %s", reason)
					}
					if reason != want {
						t.Errorf("lost %q, want %q", reason, want)
					}
				case <-time.After(quiet):
					if !buggy {
						t.Fatal("no lost event")
					}
				}
				if how == "disconnect" {
					// The session survived: the node still blocks others until the
					// next acquire of a cleans it up.
					a.c.reconnect()
					if !exists(z, ga.Node) {
						t.Fatal("a's node is gone after a mere disconnect")
					}
					return
				}
				b.mustAcquire() // a's node went with its session
				a.c.reconnect()
				err := a.l.Release()
				if !errors.Is(err, ErrNotHeld) || !Definite(err) {
					t.Fatalf("a's release after expiry: %v, want a definite ErrNotHeld", err)
				}
			})
		})
	}
}

// TestLostHoldIsCleanedUp: after a disconnect is reported as lost, the session lives
// on with its node; the next acquire deletes that node first.
func TestLostHoldIsCleanedUp(t *testing.T) {
	z := newFakeZK()
	a := newInst(t, z, "a", MutantNone)
	ga := a.mustAcquire()
	a.c.disconnect()
	if r := <-a.lost; r != "connection lost while holding" {
		t.Fatalf("lost %q", r)
	}
	// While still cut off, the acquire waits to delete the old node, and gives up
	// with a definite timeout.
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	_, err := a.l.Acquire(ctx)
	expectTimeout(t, "acquire while cut off", err)
	ach, _ := a.acquireAsync()
	stillWaiting(t, ach, "acquire while cut off")
	a.c.reconnect()
	r := wait(t, ach, "acquire after reconnecting")
	if r.err != nil {
		t.Fatal(r.err)
	}
	g := r.g
	if exists(z, ga.Node) || len(queue(t, z)) != 1 || g.Token <= ga.Token {
		t.Fatalf("queue %v after re-acquiring (old %s, new %s)", queue(t, z), ga.Node, g.Node)
	}
}

// TestTimeoutWithUncertainDelete: a timed-out acquire whose delete is in doubt is
// not definite; the next acquire deletes the node first.
func TestTimeoutWithUncertainDelete(t *testing.T) {
	z := newFakeZK()
	a := newInst(t, z, "a", MutantNone)
	b := newInst(t, z, "b", MutantNone)
	a.mustAcquire()
	drop := true
	b.c.hook = func(op, path string) fault {
		if op == "Delete" && drop {
			drop = false
			return faultDrop
		}
		return faultNone
	}
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	_, err := b.l.Acquire(ctx)
	if err == nil || Definite(err) {
		t.Fatalf("b's acquire: %v, want an uncertain error", err)
	}
	t.Logf("b's acquire: %v", err)
	if len(owned(t, z, sessionID(b.c))) != 1 {
		t.Fatalf("queue %v, want b's node left", queue(t, z))
	}
	if err := a.l.Release(); err != nil {
		t.Fatal(err)
	}
	g := b.mustAcquire()
	if q := queue(t, z); len(q) != 1 || lockPath+"/"+q[0] != g.Node {
		t.Fatalf("queue %v, want b's new node only", q)
	}
}

// TestExpiryWhileWaiting: a waiter whose session expires makes a new node in its new
// session and gets the lock in turn.
func TestExpiryWhileWaiting(t *testing.T) {
	z := newFakeZK()
	a := newInst(t, z, "a", MutantNone)
	b := newInst(t, z, "b", MutantNone)
	ga := a.mustAcquire()
	bch, _ := b.acquireAsync()
	eventually(t, "b waits behind a", func() bool { return z.watchers(ga.Node) == 1 })
	old := sessionID(b.c)
	b.c.expire()
	b.c.reconnect()
	eventually(t, "b queued again in its new session", func() bool { return len(owned(t, z, sessionID(b.c))) == 1 })
	if err := a.l.Release(); err != nil {
		t.Fatal(err)
	}
	r := wait(t, bch, "b's acquire")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := z.owner(r.g.Node); got == old || got != sessionID(b.c) {
		t.Fatalf("b holds a node of session 0x%x; old 0x%x, new 0x%x", got, old, sessionID(b.c))
	}
}

// TestForeignNodeIsNotTaken: the node found after a lost create must be owned by
// the client's session; a node of another session is never taken as the lock node.
func TestForeignNodeIsNotTaken(t *testing.T) {
	z := newFakeZK()
	guid := func() string { return "same" }
	x := newInst(t, z, "x", MutantNone, func(c *Config) { c.NewGUID = guid })
	b := newInst(t, z, "b", MutantNone, func(c *Config) { c.NewGUID = guid })
	gx := x.mustAcquire()
	drop := true
	b.c.hook = func(op, path string) fault {
		if op == "Create" && strings.HasPrefix(path, lockPath+"/") && drop {
			drop = false
			return faultDrop
		}
		return faultNone
	}
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	_, err := b.l.Acquire(ctx)
	expectTimeout(t, "b's acquire", err)
	if !exists(z, gx.Node) {
		t.Fatal("x's node was deleted")
	}
}

func TestCounter(t *testing.T) {
	z := newFakeZK()
	fenced := func(c *Config) { c.Fenced = true }
	a := newInst(t, z, "a", MutantNone, fenced)
	u := newInst(t, z, "u", MutantNone)
	other := z.client()

	if v, err := u.l.Read(); err != nil || v != 0 {
		t.Fatalf("read of a missing counter = %d, %v; want 0", v, err)
	}
	if err := a.l.Write(1); !errors.Is(err, ErrFenced) || !Definite(err) {
		t.Fatalf("fenced write without a lock = %v, want a definite ErrFenced", err)
	}
	ga := a.mustAcquire()
	if err := a.l.Write(7); err != nil {
		t.Fatalf("fenced write while holding: %v", err)
	}
	if v, err := a.l.Read(); err != nil || v != 7 {
		t.Fatalf("read = %d, %v; want 7", v, err)
	}
	if err := other.Delete(ga.Node, -1); err != nil {
		t.Fatal(err)
	}
	err := a.l.Write(8)
	if !errors.Is(err, ErrFenced) || !Definite(err) || err.Error() != "fenced: lock node gone" {
		t.Fatalf("fenced write after the node was deleted = %v, want a definite ErrFenced", err)
	}
	if r := <-a.lost; r != "lock node gone" {
		t.Errorf("lost %q", r)
	}
	if v, _ := a.l.Read(); v != 7 {
		t.Fatalf("counter = %d after a refused write, want 7", v)
	}
	if err := u.l.Write(9); err != nil {
		t.Fatalf("unfenced write without a lock: %v", err)
	}
	if v, _ := a.l.Read(); v != 9 {
		t.Fatalf("counter = %d, want 9", v)
	}
	if _, err := other.Set(counterPath, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := u.l.Read(); err == nil || !Definite(err) {
		t.Fatalf("read of garbage = %v, want a definite error", err)
	}
	// A lost reply of an unfenced set is an unknown outcome.
	u.c.hook = func(op, path string) fault { return faultLoseReply }
	if err := u.l.Write(10); err == nil || Definite(err) {
		t.Fatalf("write with a lost reply = %v, want an uncertain error", err)
	}
}

func TestParseCounter(t *testing.T) {
	for in, want := range map[string]int64{"": 0, " 12\n": 12, "-3": -3} {
		if v, err := ParseCounter([]byte(in)); err != nil || v != want {
			t.Errorf("ParseCounter(%q) = %d, %v", in, v, err)
		}
	}
	if _, err := ParseCounter([]byte("1x")); err == nil {
		t.Error("ParseCounter(1x) succeeded")
	}
	if string(FormatCounter(-42)) != "-42" {
		t.Error("FormatCounter")
	}
}

func TestSortQueue(t *testing.T) {
	got := sortQueue([]string{"_c_b-lock-0000000010", "x", "lock-0000000002", "_c_a-lock-0000000009"})
	want := "lock-0000000002 _c_a-lock-0000000009 _c_b-lock-0000000010"
	if strings.Join(got, " ") != want {
		t.Errorf("sortQueue = %v", got)
	}
}

func TestMutantNames(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range append([]Mutant{MutantNone, MutantHerd}, Mutants()...) {
		if seen[m.String()] || m.Description() == "" || strings.HasPrefix(m.String(), "mutant(") {
			t.Errorf("mutant %d: name %q, description %q", int(m), m.String(), m.Description())
		}
		seen[m.String()] = true
	}
}

func TestNewValidates(t *testing.T) {
	c := newFakeZK().client()
	for _, cfg := range []Config{
		{Path: lockPath},
		{Client: c, Path: "l0"},
		{Client: c, Path: lockPath, CounterPath: lockPath + "/c"},
		{Client: c, Path: lockPath, CounterPath: "c"},
		{Client: c, Path: lockPath, Mutant: MutantHerd}, // the fake cannot watch children
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}
