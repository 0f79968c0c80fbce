package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// Rule is one thing the worker protocol asks of a worker.
type Rule struct {
	// Name is short, for --rules (Config.Only) and the report.
	Name string
	// Says is the rule in one sentence.
	Says  string
	check func(*env) error
}

// Rules is every rule, in the order they run: the basics first, so that a worker
// that breaks them is told that before anything that builds on them.
func Rules() []Rule {
	return []Rule{
		{"init", "init is answered ok, with its id, within the harness's init limit", checkInit},
		{"replies", "every stdout line is a reply or an event; a reply carries the id of the request in flight, once", checkReplies},
		{"acquire-release", "acquire of a free lock is ok, release of the held lock is ok, twice over", checkAcquireRelease},
		{"timeout", "an acquire of a held lock answers fail, not before its timeout_ms nor long after, and leaves nothing behind", checkTimeout},
		{"handover", "a waiter is not granted while the lock is held, and is granted soon after the holder releases", checkHandover},
		{"lost", "a holder whose lock the server ends (a ZooKeeper session expired, the connection of a database session lock terminated) sends {\"event\":\"lost\"}, and the lock is free for others; a lease ended (a Redis key's TTL run out, a lock table's row deleted as if taken over) need not be reported", checkLost},
		{"close", "close is answered ok, the worker exits 0 and its session ends (its lock is free at once; a lease, once it runs out)", checkClose},
		{"eof", "EOF on stdin: the worker exits 0 and its session ends (its lock is free at once; a lease, once it runs out)", checkEOF},
		{"bad-request", "a request line that is malformed or out of order (acquire before init) makes the worker exit non-zero without replying", checkBadRequest},
		{"refuse", "init with a kind the worker does not support is refused: fail, not ok or info", checkRefuse},
		{"cycle", "v2 and v3 (skipped for a v1 worker): clock answers mono_ns; a cycle reports acquire and release as they happen (v3: once per op, with invoke_ns, and no reply after the last report), holds hold_us, times out after timeout_ms releasing nothing, and waits for a holder's release", checkCycle},
		{"cycle-lost", "v2 and v3 (skipped for a v1 worker): a holder whose lock the server ends during a cycle's hold (as in lost) sends lost and ends the cycle without a release", checkCycleLost},
	}
}

// skipped is a rule that could not be checked, and why.
type skipped string

func (s skipped) Error() string { return "skipped: " + string(s) }

func asSkip(err error, s *skipped) bool { return errors.As(err, s) }

// quiet is how long a rule watches for a second reply after each reply.
const quiet = 300 * time.Millisecond

// env is one rule's run: its workers, its lock path and its bounds.
type env struct {
	ctx     context.Context
	cfg     Config
	log     *transcript
	path    string
	workers []*worker
}

// bounds are the harness's own (driver.Bounds), for the session timeout sent in init.
func (e *env) bounds() driver.Bounds { return driver.Bounds{SessionTimeout: e.cfg.SessionTimeout} }

// exitBound is how long a worker may take to exit after close, EOF or a bad line.
func (e *env) exitBound() time.Duration { return 2*e.cfg.SessionTimeout + 2*time.Second }

// start starts worker name; it runs until the rule ends.
func (e *env) start(name string) (*worker, error) {
	w, err := startWorker(name, e.cfg.Argv, e.log)
	if err != nil {
		return nil, err
	}
	e.workers = append(e.workers, w)
	return w, nil
}

// ready starts the named workers (their runtimes boot together) and inits each.
func (e *env) ready(names ...string) ([]*worker, error) {
	var ws []*worker
	for _, n := range names {
		w, err := e.start(n)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	for i, w := range ws {
		m, err := w.call(e.ctx, e.initRequest(w, string(e.cfg.Kind), i+1), e.bounds().InitReplyLimit())
		if err := want(err, m, w.name+" init", workloads.ReplyOK); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// stopAll checks what the workers wrote and nobody read, then kills them.
func (e *env) stopAll() {
	for _, w := range e.workers {
		w.drain()
		w.Kill()
	}
}

// initRequest is the harness's init for this rule's lock.
func (e *env) initRequest(w *worker, kind string, slot int) workloads.Request {
	req := workloads.Request{ID: w.NextID(), Op: workloads.OpInit, Connect: e.cfg.Server.Connect(),
		SessionTimeoutMS: e.cfg.SessionTimeout.Milliseconds(), Path: e.path, Kind: kind, Permits: 1, Worker: slot}
	if workloads.Kind(kind).HasCounter() {
		req.CounterPath = e.path + "-counter"
	}
	return req
}

// acquireRequest asks for the lock (a write hold for rwlock).
func (e *env) acquireRequest(w *worker, timeout time.Duration) workloads.Request {
	req := workloads.Request{ID: w.NextID(), Op: workloads.OpAcquire, TimeoutMS: timeout.Milliseconds()}
	if e.cfg.Kind == workloads.RWLock {
		req.Mode = "write"
	}
	return req
}

// acquire acquires and wants replyType. Where an ok says the lock lives, the place
// must be one the service has and hold the lock's path, as a run asks
// (workloads.LockPlace.Within); the worker keeps it for End.
func (e *env) acquire(w *worker, timeout time.Duration, replyType string) error {
	m, err := w.call(e.ctx, e.acquireRequest(w, timeout), e.bounds().ReplyLimit(timeout))
	what := fmt.Sprintf("%s acquire (timeout %s)", w.name, timeout)
	if err := want(err, m, what, replyType); err != nil {
		return err
	}
	return e.placed(w, m, what)
}

// placed keeps where an acquire's ok (a reply or a report) says w's lock lives,
// once it is checked as a run checks it.
func (e *env) placed(w *worker, m workloads.Message, what string) error {
	if m.Lock == nil {
		return nil
	}
	if err := m.Lock.Within(kind.Of(e.cfg.Service), e.path); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	w.place = *m.Lock
	return nil
}

// holder is what w told of the lock it holds, for the server's End.
func (e *env) holder(w *worker) lockservice.Holder {
	id, passwd := w.Session()
	return lockservice.Holder{Session: id, Passwd: passwd, Place: w.place}
}

// end ends w's hold from the server's side (lockservice.Local.End); a holder that
// told too little to aim at skips the rule.
func (e *env) end(w *worker, when string) (lockservice.Ending, error) {
	ending, err := e.cfg.Server.End(e.ctx, e.holder(w))
	var cannot lockservice.CannotEnd
	switch {
	case errors.As(err, &cannot):
		return ending, skipped(string(cannot))
	case err != nil:
		return ending, fmt.Errorf("end %s's hold: %w", w.name, err)
	}
	e.log.add("suite", "--", ending.Did+" ("+w.name+"'s lock"+when+")")
	return ending, nil
}

// unreported is the rule's end when a worker was not told its lease ended
// (Ending.MustReport false) and did not report lost: not a breach, but said.
func unreported(ending lockservice.Ending, limit time.Duration) error {
	return skipped(fmt.Sprintf("A sent no lost within %s of its lock's end (%s): a library with no renewal or validity check cannot know, and a run records its holds as lasting past its lease (B got the lock)", limit, ending.Did))
}

// freeAfterEnd is how soon a lock is free for others once its holder's worker ended
// (close, EOF): at once where it goes with the session (ZooKeeper's, a database
// connection's); on a kind whose locks are leases, at worst when its lease runs out.
func (e *env) freeAfterEnd(a *worker) (time.Duration, string) {
	if kind.Of(e.cfg.Service).Lease && !a.place.SessionBound() {
		return e.cfg.SessionTimeout + 2*time.Second, "its lease (session_timeout_ms) did not run out"
	}
	return e.cfg.SessionTimeout / 2, "A's session was not ended: its lock waits for the session to expire"
}

// release releases and wants ok.
func (e *env) release(w *worker) error {
	m, err := w.call(e.ctx, workloads.Request{ID: w.NextID(), Op: workloads.OpRelease}, e.bounds().ReplyLimit(0))
	return want(err, m, w.name+" release", workloads.ReplyOK)
}

// because words err as the end of a sentence ("" for nil).
func because(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// want turns a reply (or the error waiting for it) into a rule's verdict.
func want(err error, m workloads.Message, what, replyType string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if m.Type != replyType {
		return fmt.Errorf("%s: want %s, got %s %q", what, replyType, m.Type, m.Error)
	}
	return nil
}

// acquireTimeout is the harness's default acquire timeout.
const acquireTimeout = 2 * time.Second

func checkInit(e *env) error {
	_, err := e.ready("A")
	return err
}

// checkReplies sends ids that are neither 0.. nor in order, and watches after each
// reply for a second one.
func checkReplies(e *env) error {
	w, err := e.start("A")
	if err != nil {
		return err
	}
	steps := []struct {
		id  int64
		req workloads.Request
	}{
		{5, e.initRequest(w, string(e.cfg.Kind), 1)},
		{17, e.acquireRequest(w, acquireTimeout)},
		{18, workloads.Request{Op: workloads.OpRelease}},
		{40, e.acquireRequest(w, acquireTimeout)},
		{3, workloads.Request{Op: workloads.OpRelease}},
		{41, workloads.Request{Op: workloads.OpClose}},
	}
	for _, s := range steps {
		s.req.ID = s.id
		limit := e.bounds().ReplyLimit(acquireTimeout)
		if s.req.Op == workloads.OpInit {
			limit = e.bounds().InitReplyLimit()
		}
		m, err := w.call(e.ctx, s.req, limit)
		if err := want(err, m, fmt.Sprintf("%s %s (id %d)", w.name, s.req.Op, s.id), workloads.ReplyOK); err != nil {
			return err
		}
		if err := w.quietFor(quiet); err != nil {
			return fmt.Errorf("after the reply to id %d: %w", s.id, err)
		}
	}
	return nil
}

func checkAcquireRelease(e *env) error {
	ws, err := e.ready("A")
	if err != nil {
		return err
	}
	a := ws[0]
	for range 2 {
		if err := e.acquire(a, acquireTimeout, workloads.ReplyOK); err != nil {
			return err
		}
		if err := e.release(a); err != nil {
			return err
		}
	}
	return nil
}

// checkTimeout: B times out behind A; once A releases, C must get the lock, which it
// cannot if B's failed attempt left a waiter (a lock node) behind.
func checkTimeout(e *env) error {
	ws, err := e.ready("A", "B", "C")
	if err != nil {
		return err
	}
	a, b, c := ws[0], ws[1], ws[2]
	if err := e.acquire(a, acquireTimeout, workloads.ReplyOK); err != nil {
		return err
	}
	timeout := time.Second
	start := time.Now()
	m, err := b.call(e.ctx, e.acquireRequest(b, timeout), timeout+e.cfg.SessionTimeout)
	took := time.Since(start)
	if err := want(err, m, fmt.Sprintf("B acquire (timeout %s) while A holds", timeout), workloads.ReplyFail); err != nil {
		return err
	}
	if took < timeout*9/10 {
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("B acquire (timeout %s) while A holds: failed after %s, before its timeout", timeout, took.Round(time.Millisecond))
	}
	if err := e.release(a); err != nil {
		return err
	}
	if err := e.acquire(c, acquireTimeout, workloads.ReplyOK); err != nil {
		return fmt.Errorf("after B's timed-out acquire and A's release: %w (did B's attempt leave a waiter behind?)", err)
	}
	return nil
}

// aHolds starts workers A and B and has A acquire the lock: how the rules that need
// a holder and a second client begin.
func (e *env) aHolds() (a, b *worker, err error) {
	ws, err := e.ready("A", "B")
	if err != nil {
		return nil, nil, err
	}
	if err := e.acquire(ws[0], acquireTimeout, workloads.ReplyOK); err != nil {
		return nil, nil, err
	}
	return ws[0], ws[1], nil
}

func checkHandover(e *env) error {
	a, b, err := e.aHolds()
	if err != nil {
		return err
	}
	long := 3*e.cfg.SessionTimeout + 10*time.Second
	if err := b.send(e.acquireRequest(b, long)); err != nil {
		return err
	}
	if err := b.quietFor(time.Second); err != nil {
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("B acquire (timeout %s) while A holds the lock: %w", long, err)
	}
	if err := e.release(a); err != nil {
		return err
	}
	m, err := b.await(e.ctx, e.cfg.SessionTimeout)
	return want(err, m, "B's waiting acquire, once A released", workloads.ReplyOK)
}

func checkLost(e *env) error {
	a, b, err := e.aHolds()
	if err != nil {
		return err
	}
	ending, err := e.end(a, "")
	if err != nil {
		return err
	}
	limit := e.bounds().ReplyLimit(0)
	lost, err := a.waitLost(e.ctx, limit)
	if err != nil || !lost && ending.MustReport {
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf(`A held the lock and the server %s: no {"event":"lost"} within %s%s`, ending.Did, limit, because(err))
	}
	if err := e.acquire(b, acquireTimeout, workloads.ReplyOK); err != nil || lost {
		return err
	}
	return unreported(ending, limit)
}

// checkEnd ends A while it holds the lock (end sends close or closes stdin), wants
// exit status 0, then B must get the lock sooner than A's session could expire.
func checkEnd(e *env, how string, end func(a *worker) error) error {
	a, b, err := e.aHolds()
	if err != nil {
		return err
	}
	if err := end(a); err != nil {
		return err
	}
	exitErr, exited := a.waitExit(e.exitBound())
	if !exited {
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("A did not exit within %s of %s", e.exitBound(), how)
	}
	if exitErr != nil {
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("A exited with %s after %s, want status 0", driver.ExitText(exitErr), how)
	}
	free, why := e.freeAfterEnd(a)
	if err := e.acquire(b, free, workloads.ReplyOK); err != nil {
		return fmt.Errorf("after A's %s: %w (%s)", how, err, why)
	}
	return nil
}

func checkClose(e *env) error {
	return checkEnd(e, "close", func(a *worker) error {
		m, err := a.call(e.ctx, workloads.Request{ID: a.NextID(), Op: workloads.OpClose}, e.bounds().ReplyLimit(0))
		return want(err, m, "A close", workloads.ReplyOK)
	})
}

func checkEOF(e *env) error {
	return checkEnd(e, "EOF on its stdin", func(a *worker) error {
		e.log.add(a.name, "--", "stdin closed")
		return a.CloseInput()
	})
}

// badRequests are request lines no worker may act on: not JSON, not an object, no
// id, an unknown op, a write without its value, an acquire before init.
var badRequests = []string{
	`{"id":0,"op":"init",`,
	`[1,2]`,
	`{"op":"acquire"}`,
	`{"id":0,"op":"frobnicate"}`,
	`{"id":0,"op":"write"}`,
	`{"id":0,"op":"acquire","timeout_ms":10}`,
}

// checkBadRequest sends each bad line to a fresh worker (all started at once).
func checkBadRequest(e *env) error {
	var ws []*worker
	for i := range badRequests {
		w, err := e.start(fmt.Sprintf("A%d", i+1))
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	for i, w := range ws {
		if err := w.SendRaw(badRequests[i]); err != nil {
			return err
		}
	}
	for i, w := range ws {
		exitErr, exited := w.waitExit(e.exitBound())
		switch {
		case !exited:
			return fmt.Errorf("%s did not exit within %s of the request line %s", w.name, e.exitBound(), badRequests[i])
		case exitErr == nil:
			return fmt.Errorf("%s exited 0 after the request line %s, want a non-zero status", w.name, badRequests[i])
		}
	}
	return nil
}

func checkRefuse(e *env) error {
	w, err := e.start("A")
	if err != nil {
		return err
	}
	m, err := w.call(e.ctx, e.initRequest(w, "no-such-kind", 1), e.bounds().InitReplyLimit())
	return want(err, m, `A init with kind "no-such-kind"`, workloads.ReplyFail)
}
