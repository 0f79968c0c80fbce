package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Phase says whether an event starts or stops a fault.
type Phase string

// Event phases.
const (
	// PhaseStart is recorded before a fault is applied.
	PhaseStart = Phase(histories.FStart)
	// PhaseStop is recorded after a fault is undone.
	PhaseStop = Phase(histories.FStop)
)

// Event is a fault starting or stopping, for the history (as the nemesis op that
// records Record()). Every start is followed by exactly one stop for the same fault.
type Event struct {
	// Phase is PhaseStart or PhaseStop.
	Phase Phase `json:"phase"`
	// Fault is the fault's class.
	Fault Class `json:"fault"`
	// Value says what was (or is about to be) done to whom; it is JSON-able and the
	// receiver may keep it.
	Value map[string]any `json:"value"`
	// Err says why choosing, applying or undoing the fault failed; empty if all went
	// well. A start with an Err means the fault could not even be planned (e.g. no
	// live workers) and nothing was done; a stop's Err reports apply and undo errors.
	Err string `json:"error,omitempty"`
}

// Record is the event as the value of its nemesis op in the history.
func (ev Event) Record() histories.Fault {
	return histories.Fault{Phase: histories.F(ev.Phase), Class: string(ev.Fault), Detail: ev.Value, Error: ev.Err}
}

// undoTimeout bounds the undo of a fault whose run has ended.
const undoTimeout = time.Minute

// Nemesis runs a Schedule against a Cluster: Run injects faults one at a time until
// its context ends, and HealAll takes everything back. HealAll may be called at any
// time, from any goroutine, concurrently with Run or after it, and more than once.
type Nemesis struct {
	sched  Schedule
	c      Cluster
	record func(Event)

	recMu  sync.Mutex // serializes record calls
	healMu sync.Mutex // serializes HealAll calls: each returns only once all is healed

	mu         sync.Mutex
	running    bool
	closed     bool
	done       chan struct{} // closed by the first HealAll
	stepCancel context.CancelFunc
	cur        *active
	leftover   []*active          // faults whose undo failed
	touched    map[string]netHost // by name: every network a fault changed
	stopped    map[int]bool       // workers' process groups a fault stopped
}

// active is a fault that was started.
type active struct {
	class    Class
	value    map[string]any
	undo     func(context.Context) error
	applied  chan struct{} // closed when apply has returned
	applyErr error
}

// New makes a nemesis that will run s against c and report every fault's start and
// stop to record (which may be nil; calls to it never overlap).
func New(s Schedule, c Cluster, record func(Event)) (*Nemesis, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("nemesis: no cluster")
	}
	return &Nemesis{sched: s.withDefaults(), c: c, record: record, done: make(chan struct{}),
		touched: map[string]netHost{}, stopped: map[int]bool{}}, nil
}

// Run injects the schedule's faults, one at a time, until ctx ends or HealAll is
// called; then it undoes the fault that is on (if HealAll has not) and returns. It may
// be called once.
func (n *Nemesis) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.running {
		n.mu.Unlock()
		return errors.New("nemesis: Run called twice")
	}
	n.running = true
	n.mu.Unlock()
	if len(n.sched.Classes) == 0 {
		select {
		case <-ctx.Done():
		case <-n.done:
		}
		return nil
	}
	st := newSteps(n.sched)
	for {
		s := st.next()
		if !n.wait(ctx, s.gap) {
			return nil
		}
		n.step(ctx, s)
	}
}

// wait sleeps d unless ctx ends or HealAll is called first; it reports whether to go on.
func (n *Nemesis) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil && !n.isClosed()
	case <-ctx.Done():
		return false
	case <-n.done:
		return false
	}
}

func (n *Nemesis) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// step plans, records, applies, holds and undoes one fault.
func (n *Nemesis) step(ctx context.Context, s step) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.stepCancel = cancel
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.stepCancel = nil
		n.mu.Unlock()
	}()

	p, err := s.fault.plan(sctx, n.c, s.rng)
	value := p.value
	if value == nil {
		value = map[string]any{"fault": string(s.class)}
	}
	if err != nil {
		if n.isClosed() || sctx.Err() != nil {
			return // stopping: not a fault worth recording
		}
		n.emit(Event{Phase: PhaseStart, Fault: s.class, Value: maps.Clone(value), Err: err.Error()})
		n.emit(Event{Phase: PhaseStop, Fault: s.class, Value: maps.Clone(value), Err: err.Error()})
		return
	}
	a := &active{class: s.class, value: value, undo: once(p.undo), applied: make(chan struct{})}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.cur = a
	for _, h := range p.nets {
		n.touched[h.String()] = h
	}
	for _, pid := range p.pids {
		n.stopped[pid] = true
	}
	n.mu.Unlock()

	// HealAll waits for applied before it undoes a, so this start is recorded first.
	n.emit(Event{Phase: PhaseStart, Fault: s.class, Value: maps.Clone(value)})
	a.applyErr = p.apply(sctx)
	close(a.applied)
	if a.applyErr == nil {
		sleepCtx(sctx, s.hold)
	}
	n.mu.Lock()
	mine := n.cur == a
	if mine {
		n.cur = nil
	}
	n.mu.Unlock()
	if mine {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		_ = n.finish(uctx, a, 3)
	}
}

// finish undoes a (trying up to tries times) and records its stop. A fault that cannot
// be undone is kept for HealAll to retry.
func (n *Nemesis) finish(ctx context.Context, a *active, tries int) error {
	var err error
	for i := 0; i < tries; i++ {
		if err = a.undo(ctx); err == nil || i == tries-1 || !sleepCtx(ctx, 500*time.Millisecond) {
			break
		}
	}
	var msgs []string
	if a.applyErr != nil {
		msgs = append(msgs, "apply: "+a.applyErr.Error())
	}
	if err != nil {
		msgs = append(msgs, "undo: "+err.Error())
		n.mu.Lock()
		n.leftover = append(n.leftover, a)
		n.mu.Unlock()
		err = fmt.Errorf("undo %s: %w", a.class, err)
	}
	ev := Event{Phase: PhaseStop, Fault: a.class, Value: maps.Clone(a.value)}
	if len(msgs) > 0 {
		ev.Err = msgs[0]
		for _, m := range msgs[1:] {
			ev.Err += "; " + m
		}
	}
	n.emit(ev)
	return err
}

func (n *Nemesis) emit(ev Event) {
	n.recMu.Lock()
	defer n.recMu.Unlock()
	if n.record != nil {
		n.record(ev)
	}
}

// HealAll stops the schedule for good, undoes the fault that is on and any whose undo
// failed before, and then, belt and braces, deletes every nemesis nftables table (and
// netem qdisc) on every host and namespace the nemesis touched and every server's host
// and live worker's namespace, and sends SIGCONT to every server and every worker's
// process group, and every group the nemesis stopped. It is meant for every exit path
// of a run (including errors and panics), is safe concurrently with Run, after it, or
// without it, and may be called again. It returns what it could not heal. It calls
// back into the Cluster (Servers, Clients) and the servers' hosts (Signal, Exec, and
// the undos' Start), so the caller must not hold a lock those need.
func (n *Nemesis) HealAll(ctx context.Context) error {
	n.healMu.Lock()
	defer n.healMu.Unlock()
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.done)
	}
	if n.stepCancel != nil {
		n.stepCancel()
	}
	a := n.cur
	n.cur = nil
	left := n.leftover
	n.leftover = nil
	touched := maps.Clone(n.touched)
	stopped := slices.Sorted(maps.Keys(n.stopped))
	n.mu.Unlock()

	var errs []error
	if a != nil {
		// The step's context is cancelled, so apply returns promptly.
		<-a.applied
		errs = append(errs, n.finish(ctx, a, 2))
	}
	for _, l := range left {
		if err := l.undo(ctx); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", l.class, err))
			n.mu.Lock()
			n.leftover = append(n.leftover, l)
			n.mu.Unlock()
		}
	}
	servers := n.c.Servers()
	clients := n.c.Clients()
	errs = append(errs, healNetworks(ctx, touched, servers, clients))
	errs = append(errs, resumeAll(ctx, stopped, servers, clients))
	return errors.Join(errs...)
}

// healNetworks deletes every nemesis table on the networks touched, the servers' hosts
// and the workers' namespaces, and every netem qdisc on those touched.
func healNetworks(ctx context.Context, touched map[string]netHost, servers []Server, clients []Client) error {
	nets := maps.Clone(touched)
	for _, s := range servers {
		nets[s.Host.String()] = s.Host
	}
	for _, cl := range clients {
		if cl.Netns != "" {
			nets[cl.Netns] = workerNet(cl.Netns)
		}
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(nets)) {
		if err := nftDeleteAll(ctx, nets[name]); err != nil {
			errs = append(errs, fmt.Errorf("heal %s: %w", name, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(touched)) {
		if err := netemDelete(ctx, touched[name]); err != nil {
			errs = append(errs, fmt.Errorf("heal %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// resumeAll sends SIGCONT to every server, every live worker and every worker process
// group in stopped.
func resumeAll(ctx context.Context, stopped []int, servers []Server, clients []Client) error {
	var errs []error
	for _, s := range servers {
		errs = append(errs, resumeHost(ctx, s.Host))
	}
	pids := map[int]bool{}
	for _, pid := range stopped {
		pids[pid] = true
	}
	for _, cl := range clients {
		pids[cl.Pid] = true
	}
	for _, pid := range slices.Sorted(maps.Keys(pids)) {
		if pid > 1 {
			errs = append(errs, resumeGroup(pid))
		}
	}
	return errors.Join(errs...)
}
