package models

import (
	"container/heap"
	"math/rand"

	"github.com/zlockcheck/zlockcheck/histories"
)

// GenConfig describes a synthetic mutex history for benchmarks and tests.
type GenConfig struct {
	// Ops is the number of history lines to generate.
	Ops int
	// Processes is the number of concurrent workers; a worker that crashes
	// comes back as a new process.
	Processes int
	// CrashRate is the probability that an operation crashes: it completes
	// as info and its process is never used again.
	CrashRate float64
	// DoubleGrants is the number of planted violations: acquires that
	// complete ok while another process certainly holds the lock.
	DoubleGrants int
	// Seed seeds the generator; the same config gives the same history.
	Seed int64
}

// GenerateMutexHistory simulates workers taking turns at one lock (key "")
// through a correct server: try-lock acquires that time out as failures,
// holds of random length, crashes whose locks the server frees only when
// the session expires, and optionally planted double grants. Without
// planted double grants the history is valid; with them it is invalid.
// Times are nanoseconds. Ops still under way when cfg.Ops lines are written
// are left pending.
func GenerateMutexHistory(cfg GenConfig) histories.History {
	g := &gen{
		rng:    rand.New(rand.NewSource(cfg.Seed)),
		cfg:    cfg,
		holder: -1,
		h:      make(histories.History, 0, cfg.Ops),
	}
	if cfg.Processes < 1 {
		g.cfg.Processes = 1
	}
	for i := range g.cfg.DoubleGrants {
		g.plants = append(g.plants, (i+1)*cfg.Ops/(cfg.DoubleGrants+1))
	}
	for w := range g.cfg.Processes {
		g.workers = append(g.workers, &gworker{proc: w, req: -1})
		g.at(g.between(0, thinkMax), evWake, w, -1)
	}
	g.nextProc = g.cfg.Processes
	for len(g.h) < cfg.Ops && g.q.Len() > 0 {
		e := heap.Pop(&g.q).(gevent)
		g.now = e.t
		g.handle(e)
	}
	return g.h
}

// Simulated durations, in nanoseconds.
const (
	latMin         = 20_000
	latMax         = 400_000
	holdMax        = 1_000_000
	thinkMax       = 8_000_000
	acquireTimeout = 3_000_000
	sessionTimeout = 10_000_000
)

type gevKind uint8

const (
	evWake      gevKind = iota // worker invokes acquire
	evArrive                   // an acquire request reaches the server
	evExpire                   // an acquire request times out at the server
	evComplete                 // a worker's op completes
	evRelease                  // a holding worker invokes release
	evFreeGhost                // the server frees a hold (released, or its session expired)
)

type gevent struct {
	t    int64
	seq  int64
	kind gevKind
	w    int // worker
	req  int // request
}

type gqueue []gevent

func (q gqueue) Len() int { return len(q) }
func (q gqueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q gqueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *gqueue) Push(x any)   { *q = append(*q, x.(gevent)) }
func (q *gqueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type gworker struct {
	proc    int
	req     int   // the worker's current request, -1 if none
	relAt   int64 // when a holding worker will invoke its release
	holding bool
	bogus   bool // its hold is a planted double grant
}

type greq struct {
	w       int
	proc    int
	release bool
	crashed bool // the worker crashed: its completion is info
	waiting bool // queued at the server
	done    bool // completion recorded
	outcome histories.Type
}

type gen struct {
	rng      *rand.Rand
	cfg      GenConfig
	q        gqueue
	seq      int64
	now      int64
	h        histories.History
	workers  []*gworker
	reqs     []*greq
	queue    []int // waiting acquire requests, FIFO
	holder   int   // request holding the lock at the server, -1 if free
	nextProc int
	plants   []int // line counts at which to plant a double grant
}

func (g *gen) between(lo, hi int64) int64 { return lo + g.rng.Int63n(hi-lo+1) }
func (g *gen) lat() int64                 { return g.between(latMin, latMax) }

func (g *gen) at(t int64, kind gevKind, w, req int) {
	g.seq++
	heap.Push(&g.q, gevent{t: t, seq: g.seq, kind: kind, w: w, req: req})
}

func (g *gen) record(typ histories.Type, f string, proc int) {
	g.h = append(g.h, histories.Op{Index: int64(len(g.h)), Type: typ, F: f, Process: histories.Client(proc), Time: g.now})
}

func (g *gen) handle(e gevent) {
	switch e.kind {
	case evWake:
		g.invokeAcquire(e.w)
	case evRelease:
		g.invokeRelease(e.w)
	case evArrive:
		r := g.reqs[e.req]
		r.waiting = true
		g.queue = append(g.queue, e.req)
		g.at(g.now+acquireTimeout, evExpire, r.w, e.req)
		g.grant()
	case evExpire:
		r := g.reqs[e.req]
		if !r.waiting {
			return
		}
		r.waiting = false
		for i, q := range g.queue {
			if q == e.req {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
		if !r.crashed {
			r.outcome = histories.Fail
			g.at(g.now+g.lat(), evComplete, r.w, e.req)
		}
	case evComplete:
		g.complete(e.req)
	case evFreeGhost:
		if g.holder == e.req {
			g.free()
		}
	}
}

func (g *gen) newReq(w int, release bool) int {
	wk := g.workers[w]
	r := &greq{w: w, proc: wk.proc, release: release, crashed: g.rng.Float64() < g.cfg.CrashRate}
	g.reqs = append(g.reqs, r)
	wk.req = len(g.reqs) - 1
	return wk.req
}

func (g *gen) invokeAcquire(w int) {
	wk := g.workers[w]
	id := g.newReq(w, false)
	r := g.reqs[id]
	g.record(histories.Invoke, histories.FAcquire, wk.proc)
	if len(g.plants) > 0 && len(g.h) >= g.plants[0] && g.holder >= 0 {
		// Plant a double grant if the holder certainly holds for a while yet.
		hw := g.workers[g.reqs[g.holder].w]
		okAt := g.now + latMin
		if hw.holding && !hw.bogus && g.reqs[g.holder].proc == hw.proc && hw.relAt > okAt+1 {
			g.plants = g.plants[1:]
			r.crashed = false
			r.outcome = histories.OK
			wk.bogus = true
			g.at(okAt, evComplete, w, id)
			return
		}
	}
	g.at(g.now+g.lat(), evArrive, w, id)
	if r.crashed {
		g.at(g.now+g.between(latMin, acquireTimeout), evComplete, w, id)
	}
}

func (g *gen) invokeRelease(w int) {
	wk := g.workers[w]
	id := g.newReq(w, true)
	r := g.reqs[id]
	g.record(histories.Invoke, histories.FRelease, wk.proc)
	if wk.bogus {
		r.crashed = false
		r.outcome = histories.OK
		g.at(g.now+g.lat(), evComplete, w, id)
		return
	}
	hold := g.holder
	if r.crashed {
		// The release may reach the server, or the server frees the lock
		// when the crashed worker's session expires.
		if g.rng.Intn(2) == 0 {
			g.at(g.now+g.lat(), evFreeGhost, w, hold)
		} else {
			g.at(g.now+sessionTimeout, evFreeGhost, w, hold)
		}
		g.at(g.now+g.lat(), evComplete, w, id)
		return
	}
	r.outcome = histories.OK
	l := g.lat()
	g.at(g.now+l, evFreeGhost, w, hold)
	g.at(g.now+l+g.lat(), evComplete, w, id)
}

func (g *gen) free() {
	g.holder = -1
	g.grant()
}

// grant gives a free lock to the first waiter.
func (g *gen) grant() {
	for g.holder < 0 && len(g.queue) > 0 {
		id := g.queue[0]
		g.queue = g.queue[1:]
		r := g.reqs[id]
		r.waiting = false
		g.holder = id
		if r.crashed {
			// A crashed worker's hold lasts until its session expires.
			g.at(g.now+sessionTimeout, evFreeGhost, r.w, id)
			continue
		}
		r.outcome = histories.OK
		g.at(g.now+g.lat(), evComplete, r.w, id)
	}
}

func (g *gen) complete(id int) {
	r := g.reqs[id]
	if r.done {
		return
	}
	r.done = true
	wk := g.workers[r.w]
	f := histories.FAcquire
	if r.release {
		f = histories.FRelease
	}
	if r.crashed {
		g.record(histories.Info, f, r.proc)
		// The worker comes back as a new process.
		wk.proc = g.nextProc
		g.nextProc++
		wk.req, wk.holding, wk.bogus = -1, false, false
		g.at(g.now+g.between(latMin, thinkMax), evWake, r.w, -1)
		return
	}
	g.record(r.outcome, f, r.proc)
	wk.req = -1
	switch {
	case r.release:
		wk.holding, wk.bogus = false, false
		g.at(g.now+g.between(0, thinkMax), evWake, r.w, -1)
	case r.outcome == histories.OK:
		wk.holding = true
		wk.relAt = g.now + g.between(0, holdMax)
		g.at(wk.relAt, evRelease, r.w, -1)
	default:
		g.at(g.now+g.between(0, thinkMax), evWake, r.w, -1)
	}
}
