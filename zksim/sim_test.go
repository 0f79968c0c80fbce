package zksim

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// pending is a call of a client running in its own goroutine of the bubble.
type pending[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// start runs f in a new goroutine and settles: f is then blocked in its first
// request (or done).
func start[T any](s *Sim, f func() (T, error)) *pending[T] {
	p := &pending[T]{done: make(chan struct{})}
	go func() {
		p.v, p.err = f()
		close(p.done)
	}()
	s.Settle()
	return p
}

// result returns what the call returned; it must have returned.
func (p *pending[T]) result(t *testing.T) (T, error) {
	t.Helper()
	select {
	case <-p.done:
		return p.v, p.err
	default:
		t.Fatal("the call has not returned")
		panic("unreachable")
	}
}

// running reports whether the call is still blocked.
func (p *pending[T]) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// call makes one call of c that sends one request, lets the request run, and
// returns what the call returned.
func call[T any](t *testing.T, s *Sim, c *Client, f func() (T, error)) (T, error) {
	t.Helper()
	p := start(s, f)
	if _, err := s.Run(c); err != nil {
		t.Fatal(err)
	}
	return p.result(t)
}

// noValue adapts a call that returns only an error.
func noValue(f func() error) func() (struct{}, error) {
	return func() (struct{}, error) { return struct{}{}, f() }
}

func mustCall[T any](t *testing.T, s *Sim, c *Client, f func() (T, error)) T {
	t.Helper()
	v, err := call(t, s, c, f)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func stat(t *testing.T, s *Sim, p string) Stat {
	t.Helper()
	st, _, ok := s.Node(p)
	if !ok {
		t.Fatalf("%s does not exist", p)
	}
	return st
}

func TestCreateStatAndSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := s.NewClient("c")
		create := func(p string, flags zlcmutex.CreateFlags) string {
			return mustCall(t, s, c, func() (string, error) { return c.Create(p, []byte("xy"), flags) })
		}
		if got := create("/q", 0); got != "/q" {
			t.Fatalf("create /q = %q", got)
		}
		q := stat(t, s, "/q")
		if q.Czxid != 1 || q.Mzxid != 1 || q.Pzxid != 1 || q.Version != 0 || q.Cversion != 0 ||
			q.NumChildren != 0 || q.DataLength != 2 || q.EphemeralOwner != 0 {
			t.Fatalf("stat of /q: %+v", q)
		}
		first := create("/q/n-", zlcmutex.FlagSequential|zlcmutex.FlagEphemeral)
		second := create("/q/n-", zlcmutex.FlagSequential)
		if first != "/q/n-0000000000" || second != "/q/n-0000000001" {
			t.Fatalf("sequential names %q, %q", first, second)
		}
		if owner := stat(t, s, first).EphemeralOwner; owner != s.Session(c).ID {
			t.Fatalf("ephemeral owner 0x%x, want the session 0x%x", owner, s.Session(c).ID)
		}
		mustCall(t, s, c, noValue(func() error { return c.Delete(first, -1) }))
		q = stat(t, s, "/q")
		if q.Cversion != 3 || q.NumChildren != 1 || q.Pzxid != 4 || q.Mzxid != 1 {
			t.Fatalf("stat of /q after two creates and a delete: %+v", q)
		}
		// The sequence number is the parent's cversion, so it skips after a delete.
		if got := create("/q/n-", zlcmutex.FlagSequential); got != "/q/n-0000000003" {
			t.Fatalf("third sequential name %q", got)
		}
		st := mustCall(t, s, c, func() (zlcmutex.Stat, error) { return c.Set("/q", []byte("abc"), 0) })
		q = stat(t, s, "/q")
		if st.Version != 1 || q.Version != 1 || q.Mzxid != 6 || q.Czxid != 1 || q.DataLength != 3 {
			t.Fatalf("after set: reply %+v, stat %+v", st, q)
		}
		if _, err := call(t, s, c, func() (string, error) { return c.Create("/q", nil, 0) }); !errors.Is(err, zlcmutex.ErrNodeExists) {
			t.Fatalf("create of an existing node: %v", err)
		}
		if _, err := call(t, s, c, func() (string, error) { return c.Create("/none/x", nil, 0) }); !errors.Is(err, zlcmutex.ErrNoNode) {
			t.Fatalf("create without parent: %v", err)
		}
		if _, err := call(t, s, c, noValue(func() error { return c.Delete("/q", -1) })); !errors.Is(err, zlcmutex.ErrNotEmpty) {
			t.Fatalf("delete of a node with children: %v", err)
		}
		if _, err := call(t, s, c, noValue(func() error { return c.Delete("/q/n-0000000001", 7) })); !errors.Is(err, zlcmutex.ErrBadVersion) {
			t.Fatalf("delete at a wrong version: %v", err)
		}
		if _, err := call(t, s, c, func() (zlcmutex.Stat, error) { return c.Set("/q", nil, 0) }); !errors.Is(err, zlcmutex.ErrBadVersion) {
			t.Fatalf("set at a wrong version: %v", err)
		}
		data, full, err := call3(t, s, c, func() ([]byte, Stat, error) { return c.GetStat("/q") })
		if err != nil || string(data) != "abc" || full != stat(t, s, "/q") {
			t.Fatalf("getData: %q %+v %v", data, full, err)
		}
		names := mustCall(t, s, c, func() ([]string, error) { return c.Children("/q") })
		slices.Sort(names)
		if !slices.Equal(names, []string{"n-0000000001", "n-0000000003"}) {
			t.Fatalf("children %q", names)
		}
		if _, err := call(t, s, c, noValue(func() error { return c.Sync("/q") })); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if _, err := call(t, s, c, func() (string, error) { return c.Create("/q/e", nil, zlcmutex.FlagEphemeral) }); err != nil {
			t.Fatal(err)
		}
		if _, err := call(t, s, c, func() (string, error) { return c.Create("/q/e/x", nil, 0) }); err == nil || zlcmutex.Definite(err) {
			t.Fatalf("a child of an ephemeral node: %v", err)
		}
	})
}

// call3 is call for a function of three results.
func call3[A, B any](t *testing.T, s *Sim, c *Client, f func() (A, B, error)) (A, B, error) {
	t.Helper()
	type ab struct {
		a A
		b B
	}
	v, err := call(t, s, c, func() (ab, error) {
		a, b, err := f()
		return ab{a, b}, err
	})
	return v.a, v.b, err
}

func TestMultiIsAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := s.NewClient("c")
		for _, p := range []string{"/a", "/b"} {
			mustCall(t, s, c, func() (string, error) { return c.Create(p, []byte("0"), 0) })
		}
		zxid := s.Zxid()
		_, err := call(t, s, c, noValue(func() error {
			return c.Multi(zlcmutex.CheckOp("/a", 0), zlcmutex.SetOp("/b", []byte("1"), -1), zlcmutex.SetOp("/a", []byte("1"), 0))
		}))
		if err != nil {
			t.Fatal(err)
		}
		a, b := stat(t, s, "/a"), stat(t, s, "/b")
		if s.Zxid() != zxid+1 || a.Mzxid != zxid+1 || b.Mzxid != zxid+1 || a.Version != 1 {
			t.Fatalf("a multi is one transaction: zxid %d, /a %+v, /b %+v", s.Zxid(), a, b)
		}
		for _, tc := range []struct {
			ops   []zlcmutex.Op
			index int
			err   error
		}{
			{[]zlcmutex.Op{zlcmutex.SetOp("/b", []byte("2"), -1), zlcmutex.CheckOp("/a", 0)}, 1, zlcmutex.ErrBadVersion},
			{[]zlcmutex.Op{zlcmutex.SetOp("/b", []byte("2"), -1), zlcmutex.CheckOp("/none", -1)}, 1, zlcmutex.ErrNoNode},
			{[]zlcmutex.Op{zlcmutex.SetOp("/b", []byte("2"), 5)}, 0, zlcmutex.ErrBadVersion},
		} {
			before := s.Zxid()
			_, err := call(t, s, c, noValue(func() error { return c.Multi(tc.ops...) }))
			var me *zlcmutex.MultiError
			if !errors.As(err, &me) || me.Index != tc.index || !errors.Is(err, tc.err) {
				t.Fatalf("multi %+v: %v, want op %d failing with %v", tc.ops, err, tc.index, tc.err)
			}
			if st, data, _ := s.Node("/b"); string(data) != "1" || st.Mzxid != zxid+1 {
				t.Fatalf("a failed multi changed /b to %q (%+v)", data, st)
			}
			if s.Zxid() != before+1 {
				t.Fatalf("a failed multi took zxids %d to %d; an error transaction takes one", before, s.Zxid())
			}
		}
	})
}

// event returns what ch holds now, if anything.
func event(ch <-chan zlcmutex.Event) (zlcmutex.Event, bool) {
	select {
	case ev := <-ch:
		return ev, true
	default:
		return zlcmutex.Event{}, false
	}
}

func TestWatchesFireOnceWhenDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		a, b := s.NewClient("a"), s.NewClient("b")
		mustCall(t, s, a, func() (string, error) { return a.Create("/n", nil, 0) })
		type watched struct {
			exists bool
			ch     <-chan zlcmutex.Event
		}
		getW := func(p string) <-chan zlcmutex.Event {
			v := mustCall(t, s, a, func() (watched, error) {
				_, _, ch, err := a.GetW(p)
				return watched{ch: ch}, err
			})
			return v.ch
		}
		existsW := func(p string) watched {
			return mustCall(t, s, a, func() (watched, error) {
				ok, _, ch, err := a.ExistsW(p)
				return watched{ok, ch}, err
			})
		}
		childrenW := func(p string) <-chan zlcmutex.Event {
			return mustCall(t, s, a, func() (watched, error) {
				_, ch, err := a.ChildrenW(p)
				return watched{ch: ch}, err
			}).ch
		}
		data := getW("/n")
		missing := existsW("/m")
		if missing.exists || missing.ch == nil {
			t.Fatalf("exists of a missing node: %+v", missing)
		}
		kids := childrenW("/n")

		// b changes /n: the data watch fires, but a hears of it only when delivered.
		mustCall(t, s, b, func() (zlcmutex.Stat, error) { return b.Set("/n", []byte("x"), -1) })
		if _, ok := event(data); ok {
			t.Fatal("an event arrived before it was delivered")
		}
		if !s.CanDeliver(a) {
			t.Fatal("no event to deliver")
		}
		if _, err := s.Deliver(a); err != nil {
			t.Fatal(err)
		}
		if ev, ok := event(data); !ok || ev.Type != zlcmutex.EventNodeDataChanged || ev.Path != "/n" {
			t.Fatalf("data watch: %+v %v", ev, ok)
		}
		// One-shot: a second change fires nothing.
		mustCall(t, s, b, func() (zlcmutex.Stat, error) { return b.Set("/n", []byte("y"), -1) })
		if s.CanDeliver(a) {
			t.Fatal("a one-shot watch fired twice")
		}
		mustCall(t, s, b, func() (string, error) { return b.Create("/m", nil, 0) })
		mustCall(t, s, b, func() (string, error) { return b.Create("/n/k", nil, 0) })
		// The events are delivered in order, and all before the reply of a's next
		// request.
		get := start(s, func() ([]byte, error) { data, _, err := a.Get("/n"); return data, err })
		if _, err := s.Run(a); err != nil {
			t.Fatal(err)
		}
		if _, err := get.result(t); err != nil {
			t.Fatal(err)
		}
		if ev, ok := event(missing.ch); !ok || ev.Type != zlcmutex.EventNodeCreated {
			t.Fatalf("exists watch: %+v %v", ev, ok)
		}
		if ev, ok := event(kids); !ok || ev.Type != zlcmutex.EventNodeChildrenChanged {
			t.Fatalf("children watch: %+v %v", ev, ok)
		}
		deleted := getW("/n/k")
		mustCall(t, s, b, noValue(func() error { return b.Delete("/n/k", -1) }))
		s.Deliver(a)
		if ev, ok := event(deleted); !ok || ev.Type != zlcmutex.EventNodeDeleted {
			t.Fatalf("delete: %+v %v", ev, ok)
		}
		// No watch is left on a missing node by getData.
		if _, err := call(t, s, a, func() (watched, error) {
			_, _, ch, err := a.GetW("/gone")
			return watched{ch: ch}, err
		}); !errors.Is(err, zlcmutex.ErrNoNode) {
			t.Fatalf("getData of a missing node: %v", err)
		}
	})
}

func TestSessionExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c, other := s.NewClient("c"), s.NewClient("other")
		mustCall(t, s, c, func() (string, error) { return c.Create("/e", nil, zlcmutex.FlagEphemeral) })
		mustCall(t, s, other, func() (string, error) { return other.Create("/p", nil, 0) })
		watch := mustCall(t, s, c, func() (<-chan zlcmutex.Event, error) { _, _, ch, err := c.GetW("/p"); return ch, err })
		sess, changed := c.Session()
		pendingGet := start(s, func() ([]byte, error) { data, _, err := c.Get("/p"); return data, err })

		if _, err := s.Expire(c); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.Node("/e"); ok {
			t.Fatal("an expired session's ephemeral node is still there")
		}
		if _, err := pendingGet.result(t); !errors.Is(err, zlcmutex.ErrSessionExpired) {
			t.Fatalf("the pending request: %v", err)
		}
		select {
		case <-changed:
		default:
			t.Fatal("the session channel was not closed")
		}
		if now, _ := c.Session(); now.State != zlcmutex.StateExpired || now.ID != sess.ID {
			t.Fatalf("session after expiry %+v", now)
		}
		s.Deliver(c)
		if ev, ok := event(watch); !ok || ev.Type != zlcmutex.EventNotWatching {
			t.Fatalf("the watch of an expired session: %+v %v", ev, ok)
		}
		if _, err := s.Reconnect(c); err != nil {
			t.Fatal(err)
		}
		if now, _ := c.Session(); now.State != zlcmutex.StateConnected || now.ID == sess.ID {
			t.Fatalf("after reconnecting: %+v (old session 0x%x)", now, sess.ID)
		}

		// Disconnected, the client hears of the expiry only when it reconnects.
		mustCall(t, s, c, func() (string, error) { return c.Create("/e2", nil, zlcmutex.FlagEphemeral) })
		if _, err := s.Drop(c); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.Node("/e2"); !ok {
			t.Fatal("a disconnect ended the session")
		}
		s.Expire(c)
		if now, _ := c.Session(); now.State != zlcmutex.StateDisconnected {
			t.Fatalf("a disconnected client knows of its expiry: %+v", now)
		}
		s.Reconnect(c)
		if now, _ := c.Session(); now.State != zlcmutex.StateExpired {
			t.Fatalf("reconnected after expiry: %+v", now)
		}
		s.Reconnect(c)
		if now, _ := c.Session(); now.State != zlcmutex.StateConnected {
			t.Fatalf("no new session: %+v", now)
		}
	})
}

func TestConnectionFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := s.NewClient("c")
		// A lost reply: applied, but the client sees a connection loss.
		p := start(s, func() (string, error) { return c.Create("/a", nil, 0) })
		if _, err := s.LoseReply(c); err != nil {
			t.Fatal(err)
		}
		if _, err := p.result(t); !errors.Is(err, zlcmutex.ErrConnectionLoss) {
			t.Fatalf("lost reply: %v", err)
		}
		if _, _, ok := s.Node("/a"); !ok {
			t.Fatal("a request whose reply was lost was not applied")
		}
		if s.Session(c).State != zlcmutex.StateDisconnected || !s.SessionAlive(c) {
			t.Fatalf("after a lost reply: %+v", s.Session(c))
		}
		// A request sent while disconnected waits for the connection.
		p = start(s, func() (string, error) { return c.Create("/b", nil, 0) })
		if s.CanRun(c) {
			t.Fatal("a disconnected client's request can run")
		}
		if s.Pending(c) != "create /b" {
			t.Fatalf("pending %q", s.Pending(c))
		}
		s.Reconnect(c)
		// A dropped request: not applied.
		s.Drop(c)
		if _, err := p.result(t); !errors.Is(err, zlcmutex.ErrConnectionLoss) {
			t.Fatalf("dropped request: %v", err)
		}
		if _, _, ok := s.Node("/b"); ok {
			t.Fatal("a dropped request was applied")
		}
		s.Reconnect(c)
		mustCall(t, s, c, func() (string, error) { return c.Create("/e", nil, zlcmutex.FlagEphemeral) })
		// A crash: the session lives on until it expires; every call fails.
		p = start(s, func() (string, error) { return c.Create("/x", nil, 0) })
		if _, err := s.Crash(c); err != nil {
			t.Fatal(err)
		}
		if _, err := p.result(t); !errors.Is(err, zlcmutex.ErrClosed) {
			t.Fatalf("pending request of a crashed client: %v", err)
		}
		if _, err := c.Children("/"); !errors.Is(err, zlcmutex.ErrClosed) {
			t.Fatalf("call after a crash: %v", err)
		}
		if _, _, ok := s.Node("/e"); !ok || !s.SessionAlive(c) {
			t.Fatal("a crash ended the session")
		}
		s.Expire(c)
		if _, _, ok := s.Node("/e"); ok {
			t.Fatal("the crashed client's session expired, its node is still there")
		}
		// A close ends the session at once.
		d := s.NewClient("d")
		mustCall(t, s, d, func() (string, error) { return d.Create("/f", nil, zlcmutex.FlagEphemeral) })
		s.Close(d)
		if _, _, ok := s.Node("/f"); ok || s.SessionAlive(d) || s.Session(d).State != zlcmutex.StateClosed {
			t.Fatal("a closed client's session lives on")
		}
		if _, err := s.Run(d); err == nil {
			t.Fatal("a step of a closed client")
		}
	})
}

// TestStepEndsWhenAllBlock: a scheduler step returns once the goroutines it woke are
// blocked again, in a request, on a channel, or done.
func TestStepEndsWhenAllBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := s.NewClient("c")
		p := start(s, func() (string, error) {
			if _, err := c.Create("/a", nil, 0); err != nil {
				return "", err
			}
			_, _, ch, err := c.GetW("/a")
			if err != nil {
				return "", err
			}
			<-ch
			return c.Create("/b", nil, 0)
		})
		for _, want := range []string{"create /a", "getData /a (watch)"} {
			if got := s.Pending(c); got != want {
				t.Fatalf("pending %q, want %q", got, want)
			}
			s.Run(c)
		}
		if s.Pending(c) != "" || !p.running() {
			t.Fatal("the goroutine did not block on its watch")
		}
		other := s.NewClient("o")
		mustCall(t, s, other, noValue(func() error { return other.Delete("/a", -1) }))
		if s.Pending(c) != "" {
			t.Fatal("the watch woke the goroutine before it was delivered")
		}
		s.Deliver(c)
		if got := s.Pending(c); got != "create /b" {
			t.Fatalf("after the event: pending %q", got)
		}
		s.Run(c)
		if v, err := p.result(t); err != nil || v != "/b" {
			t.Fatalf("%q %v", v, err)
		}
	})
}

func TestChildrenComeUnsorted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := s.NewClient("c")
		mustCall(t, s, c, func() (string, error) { return c.Create("/q", nil, 0) })
		for range 8 {
			mustCall(t, s, c, func() (string, error) { return c.Create("/q/n-", nil, zlcmutex.FlagSequential) })
		}
		names := mustCall(t, s, c, func() ([]string, error) { return c.Children("/q") })
		again := mustCall(t, s, c, func() ([]string, error) { return c.Children("/q") })
		if !slices.Equal(names, again) {
			t.Fatalf("two reads of the same children differ: %q, %q", names, again)
		}
		if slices.IsSorted(names) || len(names) != 8 {
			t.Fatalf("children %q come sorted (a recipe that forgets to sort would pass)", names)
		}
	})
}
