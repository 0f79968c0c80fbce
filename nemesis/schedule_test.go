package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseClasses(t *testing.T) {
	got, err := ParseClasses("kill,partition,client-pause")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Class{ClassKill, ClassPartition, ClassClientPause}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, none := range []string{"", "none", " none ", ","} {
		got, err := ParseClasses(none)
		if err != nil || len(got) != 0 {
			t.Errorf("ParseClasses(%q) = %v, %v; want nothing", none, got, err)
		}
	}
	all, err := ParseClasses("all")
	if err != nil || !reflect.DeepEqual(all, Classes()) {
		t.Fatalf("all = %v, %v", all, err)
	}
	if len(all) != 10 {
		t.Fatalf("want 10 classes, got %d", len(all))
	}
	got, err = ParseClasses(" Kill , kill,all")
	if err != nil || got[0] != ClassKill || len(got) != len(Classes()) {
		t.Fatalf("duplicates: %v, %v", got, err)
	}
	_, err = ParseClasses("kill,partiton")
	if err == nil {
		t.Fatal("unknown class accepted")
	}
	for _, want := range []string{`"partiton"`, "none", "all", "kill", "reply-loss", "client-server-partition", "session-expire"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if err := (Schedule{Classes: []Class{"bogus"}}).Validate(); err == nil {
		t.Error("schedule with an unknown class validated")
	}
}

// stepSummary is what a step chose, comparable across runs.
func stepSummary(s step) string {
	return fmt.Sprintf("%s %s %#v %s %d", s.gap, s.class, s.fault, s.hold, s.rng.Uint64())
}

func TestStepsDeterministic(t *testing.T) {
	s := Schedule{Classes: Classes(), Interval: 10 * time.Second, SessionTimeout: 4 * time.Second, Seed: 42}
	a, b, c := newSteps(s), newSteps(s), newSteps(Schedule{Classes: Classes(), Seed: 43})
	same := 0
	seen := map[Class]bool{}
	for i := 0; i < 500; i++ {
		x, y, z := a.next(), b.next(), c.next()
		if stepSummary(x) != stepSummary(y) {
			t.Fatalf("step %d differs for the same seed:\n%s\n%s", i, stepSummary(x), stepSummary(y))
		}
		if stepSummary(x) == stepSummary(z) {
			same++
		}
		seen[x.class] = true
		if x.gap < 5*time.Second || x.gap >= 15*time.Second {
			t.Fatalf("gap %s outside [Interval/2, 3·Interval/2)", x.gap)
		}
		var lo, hi time.Duration
		switch x.class {
		case ClassClientPartition, ClassClientPause:
			lo, hi = 7*time.Second, 9*time.Second
		case ClassReplyLoss:
			lo, hi = 3400*time.Millisecond, 3400*time.Millisecond+1
		case ClassSessionExpire, ClassClientKill:
			lo, hi = 0, 1
		default:
			lo, hi = 5*time.Second, 15*time.Second
		}
		if x.hold < lo || x.hold >= hi {
			t.Fatalf("%s held %s, want [%s, %s)", x.class, x.hold, lo, hi)
		}
		if p, ok := x.fault.(Packet); ok && (p.Loss < 10 || p.Loss > 50 || p.Delay != 0) {
			t.Fatalf("packet fault %+v: want loss 10..50 and no delay", p)
		}
	}
	if same > 10 {
		t.Fatalf("seeds 42 and 43 agree on %d of 500 steps", same)
	}
	if len(seen) != len(Classes()) {
		t.Fatalf("500 steps picked only %v", seen)
	}
}

// fakeCluster is a FAKE cluster for unit tests: it touches no process and no network.
// Its hosts and namespaces ("zlc-fake-...") do not exist, so every nftables fault fails
// to apply (deterministically) without running nft; its servers have no pid, so
// nothing is signalled; Dial always fails.
type fakeCluster struct {
	mu      sync.Mutex
	n       int
	down    map[int]bool
	clients []Client
	holder  bool
	// idleAndWaiter: the first client is idle and the second waits (else nobody is
	// either, and a fault aimed at them waits DefaultHolderWait for one, then picks
	// at random: TestHolderFallback).
	idleAndWaiter bool
	calls         []string
	// holderServer is the server every client is connected to (0: unknown).
	holderServer int
	// observers: the last observers of the n servers are observers.
	observers int
}

var _ Cluster = (*fakeCluster)(nil)

func newFakeCluster(n, workers int) *fakeCluster {
	f := &fakeCluster{n: n, down: map[int]bool{}, holder: true}
	for w := 1; w <= workers; w++ {
		f.clients = append(f.clients, Client{Process: 10 + w, Slot: w, Netns: fmt.Sprintf("zlc-fake-w%d", w),
			Addr: netip.AddrFrom4([4]byte{10, 77, 2, byte(w)}), SessionID: fmt.Sprintf("0x%x", 0x100+w),
			Passwd: "c2VjcmV0"})
	}
	return f
}

func (f *fakeCluster) log(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeCluster) Servers() []Server {
	var out []Server
	for id := f.n; id >= 1; id-- { // deliberately unsorted
		out = append(out, Server{ID: id, Host: &fakeHost{f: f, id: id}, Observer: id > f.n-f.observers})
	}
	return out
}

func (f *fakeCluster) Leader(context.Context) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := 1; id <= f.n; id++ {
		if !f.down[id] {
			return id, true
		}
	}
	return 0, false
}

// fakeHost is a FAKE server host of a fakeCluster: it keeps track of kills and
// restarts; it has no process (Pid 0) and its network is gone.
type fakeHost struct {
	f  *fakeCluster
	id int
}

var _ ServerHost = (*fakeHost)(nil)

func (h *fakeHost) String() string   { return fmt.Sprintf("zlc-fake-s%d", h.id) }
func (h *fakeHost) Addr() netip.Addr { return netip.AddrFrom4([4]byte{10, 77, 1, byte(h.id)}) }
func (h *fakeHost) Pid() int         { return 0 }

func (h *fakeHost) Start(context.Context) error {
	h.f.log("restart %d", h.id)
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	delete(h.f.down, h.id)
	return nil
}

func (h *fakeHost) Kill(context.Context) error {
	h.f.log("kill %d", h.id)
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.down[h.id] = true
	return nil
}

func (h *fakeHost) Signal(context.Context, syscall.Signal) error {
	return fmt.Errorf("%s: %w", h, ErrNotRunning)
}

func (h *fakeHost) Exec(context.Context, []byte, ...string) ([]byte, error) {
	return nil, fmt.Errorf("fake host %s does not exist: %w", h, ErrHostGone)
}

func (h *fakeHost) TablePrefix() string { return TablePrefix }

func (h *fakeHost) LogTail(context.Context, int) ([]string, error) { return nil, nil }

func (f *fakeCluster) Clients() []Client { return append([]Client(nil), f.clients...) }

func (f *fakeCluster) Holder() (Client, bool) {
	if !f.holder || len(f.clients) == 0 {
		return Client{}, false
	}
	return f.clients[len(f.clients)-1], true
}

// Idle: the fake has no lock cycles; nobody is idle unless idleAndWaiter (the first
// client).
func (f *fakeCluster) Idle() (Client, bool) {
	if !f.idleAndWaiter || len(f.clients) == 0 {
		return Client{}, false
	}
	return f.clients[0], true
}

// Waiter: the fake has no lock cycles; nobody waits unless idleAndWaiter (the second
// client).
func (f *fakeCluster) Waiter() (Client, bool) {
	if !f.idleAndWaiter || len(f.clients) < 2 {
		return Client{}, false
	}
	return f.clients[1], true
}

// ServerOf: every client of the fake is connected to server holderServer (none when 0).
func (f *fakeCluster) ServerOf(context.Context, Client) (int, bool) {
	return f.holderServer, f.holderServer > 0
}

func (f *fakeCluster) Dial(context.Context, string, time.Duration) (net.Conn, error) {
	return nil, errors.New("fake cluster: no network")
}

// runFake runs a nemesis on a fake cluster until it has recorded n events (and the
// stop of the fault then on), and returns the events as JSON lines.
// The fake has a holder, an idle worker and a waiter: a fault aimed at one finds it
// at once (without them each such fault waited DefaultHolderWait, 2 s, and the test
// took 90 s; the fallback is TestHolderFallback's).
func runFake(t *testing.T, seed int64, n int) []string {
	t.Helper()
	fc := newFakeCluster(5, 4)
	fc.idleAndWaiter = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events []string
	nem, err := New(Schedule{Classes: Classes(), Interval: 2 * time.Millisecond, SessionTimeout: 4 * time.Millisecond, Seed: seed}, fc,
		func(ev Event) {
			b, err := json.Marshal(ev)
			if err != nil {
				t.Errorf("event not JSON-able: %v: %+v", err, ev)
			}
			events = append(events, string(b))
			if len(events) >= n {
				cancel()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := nem.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nem.HealAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(events) < n {
		t.Fatalf("only %d events", len(events))
	}
	checkPairs(t, events)
	return events[:n]
}

// checkPairs: events alternate start, stop, for the same fault.
func checkPairs(t *testing.T, events []string) {
	t.Helper()
	if len(events)%2 != 0 {
		t.Fatalf("odd number of events: %d", len(events))
	}
	for i := 0; i < len(events); i += 2 {
		var start, stop Event
		_ = json.Unmarshal([]byte(events[i]), &start)
		_ = json.Unmarshal([]byte(events[i+1]), &stop)
		if start.Phase != PhaseStart || stop.Phase != PhaseStop || start.Fault != stop.Fault {
			t.Fatalf("events %d, %d are not a start and its stop:\n%s\n%s", i, i+1, events[i], events[i+1])
		}
	}
}

func TestRunDeterministicWithFakeCluster(t *testing.T) {
	a := runFake(t, 7, 120)
	b := runFake(t, 7, 120)
	if !reflect.DeepEqual(a, b) {
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("same seed, event %d differs:\n%s\n%s", i, a[i], b[i])
			}
		}
	}
	c := runFake(t, 8, 120)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same faults")
	}
	// Every class shows up, with its targets in the start event.
	text := strings.Join(a, "\n")
	for _, class := range Classes() {
		if !strings.Contains(text, fmt.Sprintf(`"fault":%q`, class)) {
			t.Errorf("class %s never picked in 120 events", class)
		}
	}
	for _, want := range []string{`"grudge":{"s1":`, `"picked":"holder"`, `"picked":"idle"`, `"picked":"waiter"`, `"servers":["s`, `does not exist`,
		`"loss_percent":`, `fake cluster: no network`} {
		if !strings.Contains(text, want) {
			t.Errorf("no event mentions %s", want)
		}
	}
}

func TestHealAllConcurrentWithRun(t *testing.T) {
	fc := newFakeCluster(3, 2)
	var mu sync.Mutex
	var events []string
	nem, err := New(Schedule{Classes: []Class{ClassKill}, Interval: time.Millisecond, SessionTimeout: time.Second, Seed: 1}, fc, func(ev Event) {
		b, _ := json.Marshal(ev)
		mu.Lock()
		events = append(events, string(b))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- nem.Run(context.Background()) }()
	// Let a kill be held (Interval 1 ms: holds are under 2 ms, so catch one by
	// polling), then heal concurrently.
	deadline := time.Now().Add(5 * time.Second)
	for {
		fc.mu.Lock()
		down := len(fc.down)
		fc.mu.Unlock()
		if down > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nem.HealAll(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after HealAll")
	}
	if err := nem.Run(context.Background()); err == nil {
		t.Fatal("second Run accepted")
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.down) != 0 {
		t.Fatalf("servers still down after HealAll: %v (calls %v)", fc.down, fc.calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	checkPairs(t, events)
}

func TestHolderFallback(t *testing.T) {
	fc := newFakeCluster(3, 3)
	fc.holder = false
	rngs := newSteps(Schedule{Classes: Classes()}).next().rng
	start := time.Now()
	a, err := ClientKill{Target: TargetHolder, HolderWait: 100 * time.Millisecond}.plan(context.Background(), fc, rngs)
	if err == nil {
		t.Fatal("fake workers have no pid: want an error")
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("did not wait for a holder")
	}
	if p := a.value["picked"]; p != "random (no holder within 100ms)" {
		t.Fatalf("picked = %v", p)
	}
	fc.holder = true
	a, _ = ClientPartition{Target: TargetHolder}.plan(context.Background(), fc, rngs)
	if a.value["picked"] != "holder" || a.value["slot"] != 3 {
		t.Fatalf("holder not picked: %v", a.value)
	}
	fc.clients = nil
	fc.holder = false
	_, err = ClientPause{Target: TargetRandomClient}.plan(context.Background(), fc, rngs)
	if err == nil || !strings.Contains(err.Error(), "no live workers") {
		t.Fatalf("no workers: %v", err)
	}
}

func TestSessionExpireNeedsPassword(t *testing.T) {
	fc := newFakeCluster(3, 1)
	fc.clients[0].Passwd = ""
	_, err := SessionExpire{}.Apply(context.Background(), fc, newSteps(Schedule{Classes: Classes()}).next().rng)
	if err == nil || !strings.Contains(err.Error(), "did not report its session password; use client-partition") {
		t.Fatalf("got %v", err)
	}
}

func TestPacketDelayValidation(t *testing.T) {
	fc := newFakeCluster(3, 1)
	rng := newSteps(Schedule{Classes: Classes()}).next().rng
	for _, p := range []Packet{{Loss: 101}, {Jitter: time.Millisecond}, {}} {
		if _, err := p.Apply(context.Background(), fc, rng); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

func TestSignalGuards(t *testing.T) {
	for _, pid := range []int{-5, 0, 1} {
		if err := signalGroup(pid, 0); err == nil {
			t.Errorf("signalGroup(%d) accepted", pid)
		}
	}
	if _, err := workerNet("myns").Exec(context.Background(), nil, "true"); err == nil {
		t.Error("a worker namespace the run did not make was accepted")
	}
	if err := checkTable("filter"); err == nil {
		t.Error("checkTable accepted a foreign table")
	}
	for _, a := range []string{"127.0.0.1", "0.0.0.0", "224.0.0.1", "169.254.1.1", "::1"} {
		if _, err := addrSet([]netip.Addr{netip.MustParseAddr(a)}); err == nil {
			t.Errorf("addrSet accepted %s, which no server can have", a)
		}
	}
	// A server of an existing ensemble (--connect) has a real address.
	if _, err := addrSet([]netip.Addr{netip.MustParseAddr("192.168.1.1")}); err != nil {
		t.Errorf("addrSet refused a real server address: %v", err)
	}
}

func TestRunUndoesWhenContextEnds(t *testing.T) {
	fc := newFakeCluster(3, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var events []Event
	nem, err := New(Schedule{Classes: []Class{ClassKill}, Interval: 200 * time.Millisecond, SessionTimeout: time.Second, Seed: 5}, fc, func(ev Event) {
		events = append(events, ev)
		if ev.Phase == PhaseStart {
			cancel() // end the run while the kill is on
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nem.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Phase != PhaseStart || events[1].Phase != PhaseStop || events[1].Err != "" {
		t.Fatalf("events %+v", events)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.down) != 0 || len(fc.calls) < 2 || !strings.HasPrefix(fc.calls[len(fc.calls)-1], "restart") {
		t.Fatalf("Run ended without restarting the killed servers: down %v, calls %v", fc.down, fc.calls)
	}
}

func TestUndoIdempotent(t *testing.T) {
	fc := newFakeCluster(3, 1)
	rng := newSteps(Schedule{Classes: Classes()}).next().rng
	a, err := Kill{Target: TargetAll}.Apply(context.Background(), fc, rng)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.Undo(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	restarts := 0
	for _, c := range fc.calls {
		if strings.HasPrefix(c, "restart") {
			restarts++
		}
	}
	if restarts != 3 {
		t.Fatalf("3 undos of killing 3 servers restarted %d times: %v", restarts, fc.calls)
	}
	// A failed apply still returns a usable undo.
	b, err := Partition{Shape: Halves}.Apply(context.Background(), fc, rng)
	if err == nil || b.Undo == nil {
		t.Fatalf("partition on a fake cluster: %v, undo nil: %t", err, b.Undo == nil)
	}
	if err := b.Undo(context.Background()); err != nil {
		t.Fatalf("undo after failed apply: %v", err)
	}
	c, err := ClientPause{}.Apply(context.Background(), &fakeCluster{}, rng)
	if err == nil || c.Undo == nil || c.Undo(context.Background()) != nil {
		t.Fatalf("failed plan: %v", err)
	}
}

// LongestHold bounds every hold the schedule draws, for each class on its own.
func TestLongestHoldBoundsEveryDrawnHold(t *testing.T) {
	for _, c := range Classes() {
		s := Schedule{Classes: []Class{c}, Interval: 3 * time.Second, SessionTimeout: 4 * time.Second, Seed: 7}
		longest := s.LongestHold()
		st := newSteps(s)
		var seen time.Duration
		for range 500 {
			step := st.next()
			if step.hold > longest {
				t.Fatalf("%s: drew a hold of %s, longer than LongestHold %s", c, step.hold, longest)
			}
			seen = max(seen, step.hold)
		}
		if seen > 0 && seen < longest*9/10 {
			t.Errorf("%s: LongestHold %s, but 500 draws never came near it (longest %s)", c, longest, seen)
		}
		if seen == 0 && longest != 0 {
			t.Errorf("%s: instantaneous fault, LongestHold %s, want 0", c, longest)
		}
	}
	if got := (Schedule{}).LongestHold(); got != 0 {
		t.Errorf("no classes: LongestHold %s, want 0", got)
	}
}

// ClientHold sets how long client partitions and pauses last, and nothing else's.
func TestClientHoldTimesClientFaultsOnly(t *testing.T) {
	const hold = 3400 * time.Millisecond
	for _, c := range Classes() {
		s := Schedule{Classes: []Class{c}, Interval: 2 * time.Second, SessionTimeout: 4 * time.Second, Seed: 3}
		st, short := newSteps(s), newSteps(Schedule{Classes: s.Classes, Interval: s.Interval, SessionTimeout: s.SessionTimeout, Seed: s.Seed, ClientHold: hold})
		for range 50 {
			a, b := st.next(), short.next()
			switch c {
			case ClassClientPartition, ClassClientPause:
				if b.hold != hold || a.hold < 7*time.Second {
					t.Fatalf("%s: holds %s with ClientHold %s, %s without; want it and about two sessions", c, b.hold, hold, a.hold)
				}
			default:
				if a.hold != b.hold {
					t.Fatalf("%s: ClientHold changed its hold from %s to %s", c, a.hold, b.hold)
				}
			}
		}
	}
	if err := (Schedule{ClientHold: -time.Second}).Validate(); err == nil {
		t.Error("a negative client hold validated")
	}
}

// Each catalogue entry draws a fault of its own class, aimed at the side it says.
func TestCatalogueDrawsItsOwnClass(t *testing.T) {
	for _, c := range Classes() {
		st := newSteps(Schedule{Classes: []Class{c}, Interval: time.Second, SessionTimeout: time.Second, Seed: 3,
			ClientTargets: []ClientTarget{TargetRandomClient}})
		step := st.next()
		fc := newFakeCluster(3, 2)
		p, _ := step.fault.plan(context.Background(), fc, step.rng)
		if got := p.value["fault"]; got != string(c) {
			t.Errorf("class %s drew a %T whose value says fault %v", c, step.fault, got)
		}
		_, aimsAtServers := p.value["servers"]
		if aimsAtServers != c.ServerFault() && c != ClassPartition {
			t.Errorf("class %s: ServerFault %t, but its fault's value %v", c, c.ServerFault(), p.value)
		}
	}
	if Class("bogus").ServerFault() {
		t.Error("an unknown class is a server fault")
	}
}

// isolate-follower-quorum cuts off the follower the lock holder is connected to, when
// the holder is on a follower; otherwise a random follower.
func TestIsolateFollowerQuorumAimsAtTheHoldersFollower(t *testing.T) {
	rng := newSteps(Schedule{Classes: Classes(), SessionTimeout: time.Second}).next().rng
	for _, tc := range []struct {
		holderServer int
		want         string
	}{{2, "s2"}, {3, "s3"}} {
		fc := newFakeCluster(3, 2)
		fc.holderServer = tc.holderServer
		p, err := Partition{Shape: IsolateFollowerQuorum}.plan(context.Background(), fc, rng)
		if err != nil {
			t.Fatal(err)
		}
		if p.value["holder_server"] != tc.want {
			t.Fatalf("holder on %s: value %v", tc.want, p.value)
		}
		g := p.value["grudge"]
		if s := fmt.Sprint(g); !strings.Contains(s, tc.want+":[") {
			t.Errorf("holder on %s: grudge %v does not cut it off", tc.want, g)
		}
	}
	fc := newFakeCluster(3, 2)
	fc.holderServer = 1 // the leader: no follower to aim at
	p, err := Partition{Shape: IsolateFollowerQuorum}.plan(context.Background(), fc, rng)
	if err != nil {
		t.Fatal(err)
	}
	if _, aimed := p.value["holder_server"]; aimed {
		t.Errorf("holder on the leader: aimed anyway: %v", p.value)
	}
}

// With observers, isolate-follower-quorum cuts off the server the holder is on
// whatever its role, and records the role for the cause class.
func TestIsolateFollowerQuorumAimsAtTheHoldersObserver(t *testing.T) {
	rng := newSteps(Schedule{Classes: Classes(), SessionTimeout: time.Second}).next().rng
	for _, tc := range []struct {
		holderServer int
		want, role   string
	}{{4, "s4", "observer"}, {5, "s5", "observer"}, {2, "s2", "follower"}} {
		fc := newFakeCluster(5, 2)
		fc.observers, fc.holderServer = 2, tc.holderServer
		p, err := Partition{Shape: IsolateFollowerQuorum}.plan(context.Background(), fc, rng)
		if err != nil {
			t.Fatal(err)
		}
		if p.value["holder_server"] != tc.want || p.value["cut_off"] != tc.want || p.value["cut_off_role"] != tc.role {
			t.Fatalf("holder on %s: value %v, want it cut off as a %s", tc.want, p.value, tc.role)
		}
		g := p.value["grudge"].(map[string][]string)
		if len(g[tc.want]) != 4 {
			t.Errorf("holder on %s: grudge %v does not cut it off from the 4 others", tc.want, g)
		}
	}
}

// The quorum's targets count the voters only: a majority of 3 voters and 2 observers
// is 2 voters, a minority 1; one and all may take an observer.
func TestQuorumTargetsCountVoters(t *testing.T) {
	fc := newFakeCluster(5, 1)
	fc.observers = 2
	rng := rand.New(rand.NewPCG(1, 2))
	sawObserver := false
	for range 50 {
		for _, tc := range []struct {
			t    Target
			want int
		}{{TargetMajority, 2}, {TargetMinority, 1}} {
			ids, _, err := pickServers(context.Background(), fc, tc.t, rng)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != tc.want || slices.ContainsFunc(ids, func(id int) bool { return id > 3 }) {
				t.Fatalf("%s: %v, want %d voters (s1..s3)", tc.t, ids, tc.want)
			}
		}
		ids, _, _ := pickServers(context.Background(), fc, TargetOne, rng)
		sawObserver = sawObserver || ids[0] > 3
		if all, _, _ := pickServers(context.Background(), fc, TargetAll, rng); len(all) != 5 {
			t.Fatalf("all: %v", all)
		}
	}
	if !sawObserver {
		t.Error("target one never took an observer in 50 draws")
	}
}

// The quorum's shapes cut the voters: an observer drops nothing and nobody drops it.
func TestQuorumShapesLeaveObserversOut(t *testing.T) {
	for _, shape := range []Shape{Halves, RandomHalves, MajoritiesRing, Bridge, IsolateLeader} {
		fc := newFakeCluster(5, 1)
		fc.observers = 2
		p, err := Partition{Shape: shape}.plan(context.Background(), fc, rand.New(rand.NewPCG(3, 4)))
		if err != nil {
			t.Fatal(err)
		}
		g := p.value["grudge"].(map[string][]string)
		if len(g) != 5 {
			t.Errorf("%s: grudge %v does not list every server", shape, g)
		}
		for from, drops := range g {
			if (from == "s4" || from == "s5") && len(drops) > 0 || slices.Contains(drops, "s4") || slices.Contains(drops, "s5") {
				t.Errorf("%s: grudge %v cuts an observer", shape, g)
			}
		}
	}
}
