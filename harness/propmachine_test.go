package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// The lock property on a real ensemble (see property_test.go): one run drives 2-4
// worker processes of a recipe through a schedule of steps, one step at a time,
// recording the history as the harness does, and checks mutual exclusion after every
// step; then, with faults off, liveness (every client acquires in turn within a
// bound), orphans (no lock node is left once every client is idle, and none once every
// session is gone), and the history with models' mutex checker.

// Step kinds of the lock property.
const (
	// stepAcquire sends an acquire with timeout D and waits at most propSettle for its
	// reply: the client may be left waiting in the queue.
	stepAcquire = "acquire"
	// stepRelease releases a client that holds (or was told it lost the lock).
	stepRelease = "release"
	// stepTimeout sends an acquire with the short timeout D while another client
	// holds, and waits for the reply: it must fail (timeout).
	stepTimeout = "timeout"
	// stepExpire closes the client's session on the servers with the nemesis's wire
	// client (the closeSession trick), while the worker keeps running.
	stepExpire = "expire"
	// stepKill SIGKILLs the worker; a new process (new session) replaces it.
	stepKill = "kill"
	// stepCut cuts the worker off from every server for D (the nemesis's
	// client-partition table), then heals.
	stepCut = "cut"
	// stepReplyLoss drops the servers' replies to the worker (the nemesis's reply-loss
	// table), sends an acquire, heals after D and waits for the reply: the acquire's
	// create is applied, its reply lost. The orphan-node case.
	stepReplyLoss = "reply-loss"
	// stepWakeLoss sends the client's acquire behind the holder, lets only watch
	// notifications reach the client (the nemesis's watches-only table) and releases
	// the holder: the client is woken, the replies to what it asks next are lost for
	// D, then the fault heals and the step waits for the acquire's reply. Past the
	// client's read timeout the request the wake-up caused fails with connection
	// loss while the session lives on.
	stepWakeLoss = "wake-loss"
	// stepWait handles messages for D and names no client: pending acquires time
	// out, a killed worker's session expires. It is always possible, so a run never
	// runs out of steps.
	stepWait = "wait"
)

// pstep is one step of a schedule: a kind, the client (slot) it applies to, and a
// duration (an acquire's timeout, a fault's length).
type pstep struct {
	Kind   string
	Client int
	D      time.Duration
}

func (s pstep) String() string {
	switch s.Kind {
	case stepWait:
		return fmt.Sprintf("%s %s", s.Kind, s.D)
	case stepAcquire, stepTimeout, stepCut, stepReplyLoss, stepWakeLoss:
		return fmt.Sprintf("%s c%d %s", s.Kind, s.Client, s.D)
	}
	return fmt.Sprintf("%s c%d", s.Kind, s.Client)
}

// parseStep reads a step as pstep.String writes it.
func parseStep(line string) (pstep, error) {
	f := strings.Fields(line)
	if len(f) == 2 && f[0] == stepWait {
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return pstep{}, fmt.Errorf("step %q: %w", line, err)
		}
		return pstep{Kind: stepWait, D: d}, nil
	}
	if len(f) < 2 || !strings.HasPrefix(f[1], "c") {
		return pstep{}, fmt.Errorf("bad step %q: want KIND cN [DURATION]", line)
	}
	n, err := strconv.Atoi(f[1][1:])
	if err != nil || n < 0 {
		return pstep{}, fmt.Errorf("bad client in step %q", line)
	}
	s := pstep{Kind: f[0], Client: n}
	switch s.Kind {
	case stepAcquire, stepTimeout, stepCut, stepReplyLoss, stepWakeLoss:
		if len(f) != 3 {
			return pstep{}, fmt.Errorf("step %q needs a duration", line)
		}
		if s.D, err = time.ParseDuration(f[2]); err != nil {
			return pstep{}, fmt.Errorf("step %q: %w", line, err)
		}
	case stepRelease, stepExpire, stepKill:
		if len(f) != 2 {
			return pstep{}, fmt.Errorf("step %q takes no duration", line)
		}
	default:
		return pstep{}, fmt.Errorf("unknown step kind %q", f[0])
	}
	return s, nil
}

// schedule is an explicit run: the number of clients and the steps; the final phase
// follows them as in every run.
type schedule struct {
	Clients int
	Steps   []pstep
}

func (s schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clients %d", s.Clients)
	for _, st := range s.Steps {
		b.WriteString("; " + st.String())
	}
	return b.String()
}

// parseSchedule reads "clients N; STEP; STEP..." as schedule.String writes it.
func parseSchedule(text string) (schedule, error) {
	parts := strings.Split(text, ";")
	var s schedule
	if _, err := fmt.Sscanf(strings.TrimSpace(parts[0]), "clients %d", &s.Clients); err != nil || s.Clients < 1 {
		return s, fmt.Errorf("schedule %q must start with \"clients N\"", text)
	}
	for _, p := range parts[1:] {
		if strings.TrimSpace(p) == "" {
			continue
		}
		st, err := parseStep(strings.TrimSpace(p))
		if err != nil {
			return s, err
		}
		if st.Client >= s.Clients {
			return s, fmt.Errorf("step %q names client c%d of %d", p, st.Client, s.Clients)
		}
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}

// Failure kinds of the lock property.
const (
	failExclusion = "mutual exclusion"
	failZombie    = "zombie holder"
	failLiveness  = "liveness"
	failOrphan    = "orphan"
	failModel     = "history"
	failHarness   = "harness"
)

// propFailure is a broken property.
type propFailure struct {
	Kind string
	Msg  string
}

func (f *propFailure) Error() string { return f.Kind + ": " + f.Msg }

func pfail(kind, format string, args ...any) *propFailure {
	return &propFailure{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// infoPolicy says what a run does with a worker whose op answered info.
type infoPolicy int

const (
	// infoRetire kills the worker and starts a new one in its slot, as the harness
	// does (its session, and any node it left, go when the session expires).
	infoRetire infoPolicy = iota
	// infoKeep keeps the worker and its session, as an application whose lock call
	// returned an error goes on; the history gives it a new process id (an info op's
	// process is never used again). A worker whose session the servers no longer
	// have has nothing to go on with: it is retired.
	infoKeep
)

func (p infoPolicy) String() string {
	if p == infoKeep {
		return "keep"
	}
	return "retire"
}

// propRecipe is the recipe a run drives.
type propRecipe struct {
	Name string
	Argv []string
	Info infoPolicy
	// SessionTimeout is what the workers ask for (0: lockservice.DefaultSessionTimeout).
	SessionTimeout time.Duration
	// Strict (with infoKeep) holds a kept worker to the orphan invariant after every
	// step too: a node its info'd op may have left must be gone at once, not at its
	// next acquire. Without it, a kept worker's node counts only if it still blocks
	// in the final phase, where kept workers take the first turns (their next
	// acquire may clean up, as the recipe intends).
	Strict bool
}

// Timing of the lock property, relative to nothing but the session timeout: the
// steps wait for what they expect and only bound the wait.
const (
	// propSettle is how long a step keeps handling messages after it is done, so that
	// what it caused (a waiter's grant after a release) is seen before the invariant.
	propSettle = 300 * time.Millisecond
)

// pclient is one worker slot of a run: its current process and what the run knows
// of it.
type pclient struct {
	slot    int
	w       *worker
	process int
	// op is the request in flight: "" (none), init, acquire, release, close or
	// cleanup (a release that is not recorded).
	op    string
	reply workloads.Message
	// holding: the last acquire answered ok, and no release or lost event came since.
	holding bool
	// okAt is the time of the holding acquire's ok (for messages).
	okAt time.Duration
	// lostHold: told it lost the lock, not released since; its node may exist.
	lostHold bool
	// uncertain: an op answered info and the worker was kept (infoKeep).
	uncertain bool
	dead      bool
}

func (c *pclient) name() string { return fmt.Sprintf("c%d", c.slot) }

// session returns the client's current session id ("" if unreported).
func (c *pclient) session() string {
	id, _ := c.w.Session()
	return id
}

// pmsg is a worker's message, tagged with the worker.
type pmsg struct {
	w *worker
	m driver.Msg
}

// machine is one run of the lock property.
type machine struct {
	env   *propEnv
	rec   propRecipe
	st    time.Duration
	path  string
	dir   string
	start time.Time
	hist  histories.History

	clients     []*pclient
	nextProcess int
	msgs        chan pmsg
	stop        chan struct{}
	// owners maps every reported session to the client and process that reported it.
	owners map[string]string

	steps []pstep
	trace []string
	// fail is the first broken property.
	fail *propFailure
	// undos take back faults that are on.
	undos []func(context.Context) error
	torn  bool
}

// newMachine starts n workers of rec on the run's lock path, each initialised.
func newMachine(env *propEnv, rec propRecipe, n int, path, dir string) (*machine, error) {
	st := rec.SessionTimeout
	if st <= 0 {
		st = lockservice.DefaultSessionTimeout
	}
	m := &machine{env: env, rec: rec, st: st, path: path, dir: dir, start: time.Now(),
		msgs: make(chan pmsg, 64), stop: make(chan struct{}), owners: map[string]string{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	policy := rec.Info.String()
	if rec.Info == infoKeep && rec.Strict {
		policy += ", strict"
	}
	m.note("%s, %d clients, lock %s, session timeout %s, info policy %s", rec.Name, n, path, st, policy)
	// The lock path exists, as after any first use of the lock: a create whose parent
	// is missing creates nothing, whatever happens to its reply.
	if err := createPath(env.conn, path); err != nil {
		return nil, err
	}
	for slot := range n {
		c := &pclient{slot: slot}
		m.clients = append(m.clients, c)
		if err := m.startWorker(c); err != nil {
			m.teardown()
			return nil, err
		}
	}
	return m, nil
}

func (m *machine) now() time.Duration { return time.Since(m.start) }

func (m *machine) note(format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf("[%7.3fs] ", m.now().Seconds())+fmt.Sprintf(format, args...))
}

func (m *machine) setFail(f *propFailure) {
	if m.fail == nil && f != nil {
		m.fail = f
		m.note("FAILED: %v", f)
	}
}

// startWorker starts a new process in the client's slot and initialises it.
func (m *machine) startWorker(c *pclient) error {
	var last error
	for try := range 3 {
		process := m.nextProcess
		m.nextProcess++
		host := m.env.slots[c.slot]
		log := filepath.Join(m.dir, fmt.Sprintf("%s-p%d.stderr.log", c.name(), process))
		w, err := startWorker(host, c.slot, process, m.rec.Argv, log)
		if err != nil {
			return err
		}
		c.w, c.process, c.dead, c.op = w, process, false, ""
		c.holding, c.lostHold, c.uncertain = false, false, false
		m.forward(w)
		_, err = w.send(workloads.Request{Op: workloads.OpInit, Connect: m.env.ens.Connect(),
			SessionTimeoutMS: m.st.Milliseconds(), Path: m.path, Kind: string(workloads.Mutex), Worker: process})
		if err == nil {
			c.op = "init"
			m.pump(2*m.st+20*time.Second, func() bool { return c.op == "" || c.dead })
			switch {
			case c.dead:
				err = errors.New("worker died during init")
			case c.op != "":
				err = errors.New("no init reply")
			case c.reply.Type != workloads.ReplyOK:
				err = fmt.Errorf("init: %s: %s", c.reply.Type, c.reply.Error)
			}
		}
		if err == nil {
			m.note("%s: process %d started (session %s)", c.name(), process, c.session())
			return nil
		}
		last = fmt.Errorf("%s: worker %d: %w (log %s: %s)", c.name(), process, err, log, tailFile(log, 5))
		m.note("%v; try %d", last, try+1)
		c.dead = true
		w.Kill()
	}
	return last
}

// forward copies the worker's messages to the run's channel until the worker ends or
// the run is torn down.
func (m *machine) forward(w *worker) {
	go func() {
		for {
			select {
			case wm := <-w.Lines():
				select {
				case m.msgs <- pmsg{w, wm}:
				case <-m.stop:
					return
				}
				if wm.Err != nil { // malformed, or the end
					return
				}
			case <-m.stop:
				return
			}
		}
	}()
}

// pump handles messages until done holds or limit passes, and reports done.
func (m *machine) pump(limit time.Duration, done func() bool) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for !done() {
		select {
		case pm := <-m.msgs:
			m.handle(pm)
		case <-timer.C:
			return done()
		}
	}
	return true
}

// settle handles messages for d.
func (m *machine) settle(d time.Duration) { m.pump(d, func() bool { return false }) }

// pumpPoll is pump with a condition that asks the servers: it is evaluated every
// 200ms rather than after every message.
func (m *machine) pumpPoll(limit time.Duration, done func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if done() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		m.settle(min(left, 200*time.Millisecond))
	}
}

func (m *machine) clientOf(w *worker) *pclient {
	for _, c := range m.clients {
		if c.w == w && !c.dead {
			return c
		}
	}
	return nil
}

func (m *machine) handle(pm pmsg) {
	c := m.clientOf(pm.w)
	if c == nil {
		return // a dead or replaced worker's last words
	}
	if pm.m.Err != nil {
		m.crashed(c, pm.m.Err)
		return
	}
	msg := pm.m.Msg
	switch {
	case msg.Event == workloads.EventSession:
		m.owners[msg.SessionID] = fmt.Sprintf("%s (process %d)", c.name(), c.process)
	case msg.Event == workloads.EventLost:
		if !c.holding {
			m.note("%s: lost event while not holding (ignored): %s", c.name(), msg.Error)
			return
		}
		m.record(c, histories.Invoke, histories.FRelease, func(op *histories.Op) { op.Lost, op.Error = true, msg.Error })
		m.record(c, histories.OK, histories.FRelease, func(op *histories.Op) { op.Lost, op.Error = true, msg.Error })
		c.holding, c.lostHold = false, true
		m.note("%s: told it lost the lock: %s", c.name(), msg.Error)
	case msg.ID != nil:
		m.replied(c, msg)
	}
}

// replied completes the client's op in flight.
func (m *machine) replied(c *pclient, msg workloads.Message) {
	op := c.op
	c.op, c.reply = "", msg
	switch op {
	case histories.FAcquire, histories.FRelease:
	case "cleanup":
		m.note("%s: cleanup release: %s %s", c.name(), msg.Type, msg.Error)
		return
	default:
		return
	}
	m.record(c, histories.Type(msg.Type), op, func(o *histories.Op) {
		o.Error = msg.Error
		if msg.Type == workloads.ReplyOK && len(msg.Token) > 0 {
			o.Value = json.RawMessage(`{"token":` + string(msg.Token) + `}`)
		}
	})
	m.note("%s: %s -> %s %s", c.name(), op, msg.Type, msg.Error)
	switch {
	case msg.Type == workloads.ReplyOK && op == histories.FAcquire:
		c.holding, c.lostHold, c.okAt = true, false, m.now()
	case msg.Type == workloads.ReplyInfo:
		c.holding, c.lostHold = false, false
		if nodes, err := m.nodes(); err == nil {
			m.note("lock nodes now: %s", m.describe(nodes))
		}
		if m.rec.Info == infoKeep && m.sessionAlive(c) {
			c.process = m.nextProcess
			m.nextProcess++
			c.uncertain = true
			m.note("%s: kept after info, now process %d (its session lives on)", c.name(), c.process)
			return
		}
		if m.rec.Info == infoKeep {
			m.note("%s: its session %s is gone: nothing to go on with", c.name(), c.session())
		}
		m.note("%s: retired after info: killed, to be replaced", c.name())
		c.dead = true
		c.w.Kill()
	case op == histories.FRelease:
		c.holding, c.lostHold = false, false
	}
}

// crashed records the end of a worker that died (or was killed): its open op
// completes as info; a hold it had ends at some unknown time from now.
func (m *machine) crashed(c *pclient, why error) {
	if c.dead {
		return
	}
	c.dead = true
	if c.op == histories.FAcquire || c.op == histories.FRelease {
		m.record(c, histories.Info, c.op, func(op *histories.Op) { op.Error = why.Error() })
	}
	if c.holding && c.op != histories.FRelease {
		m.record(c, histories.Invoke, histories.FRelease, nil)
		m.record(c, histories.Info, histories.FRelease, func(op *histories.Op) { op.Error = why.Error() })
	}
	c.op, c.holding, c.lostHold = "", false, false
	m.note("%s: process %d ended: %v", c.name(), c.process, why)
	c.w.Kill()
}

func (m *machine) record(c *pclient, typ histories.Type, f string, edit func(*histories.Op)) {
	op := histories.Op{Index: int64(len(m.hist)), Type: typ, F: f, Process: histories.Client(c.process), Time: m.now().Nanoseconds()}
	if edit != nil {
		edit(&op)
	}
	m.hist = append(m.hist, op)
}

func (m *machine) recordNemesis(phase string, value map[string]any) {
	data, _ := json.Marshal(value)
	m.hist = append(m.hist, histories.Op{Index: int64(len(m.hist)), Type: histories.Info, F: phase,
		Process: histories.NemesisProcess, Time: m.now().Nanoseconds(), Value: data})
}

// request records the invoke of f and sends req.
func (m *machine) request(c *pclient, f string, req workloads.Request) {
	if f == histories.FAcquire || f == histories.FRelease {
		m.record(c, histories.Invoke, f, nil)
	}
	c.op = f
	if _, err := c.w.send(req); err != nil {
		m.crashed(c, fmt.Errorf("write to worker: %w", err))
	}
}

// sessionAlive reports whether the servers still have the client's current session.
func (m *machine) sessionAlive(c *pclient) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.env.ens.LiveSessions(ctx)[c.session()]
}

// replyBound is how long a worker may take to answer an op with timeout d, as in the
// harness (Config.ReplyLimit).
func (m *machine) replyBound(d time.Duration) time.Duration {
	return Config{SessionTimeout: m.st}.ReplyLimit(d)
}

// await waits for the client's op in flight; a worker that does not answer within
// limit is killed (its op completes as info).
func (m *machine) await(c *pclient, limit time.Duration) {
	if !m.pump(limit, func() bool { return c.op == "" || c.dead }) {
		m.crashed(c, fmt.Errorf("no reply within %s", limit))
	}
}

// possible reports whether step kind can be applied to client c now.
func (m *machine) possible(kind string, c *pclient) bool {
	if kind == stepWait {
		return true
	}
	if c.dead {
		return false
	}
	idle := c.op == ""
	switch kind {
	case stepAcquire, stepReplyLoss:
		return idle && !c.holding
	case stepRelease:
		return idle && (c.holding || c.lostHold)
	case stepTimeout:
		if !idle || c.holding {
			return false
		}
		for _, o := range m.clients {
			if o != c && !o.dead && o.holding {
				return true
			}
		}
		return false
	case stepExpire:
		id, pw := c.w.Session()
		return id != "" && pw != "" && !(c.holding && m.othersWaiting(c))
	case stepCut:
		return !(c.holding && m.othersWaiting(c))
	case stepKill:
		return true
	case stepWakeLoss:
		// c must be the only waiter, the one the holder's release wakes.
		return idle && !c.holding && m.holder() != nil && !m.othersWaiting(c)
	}
	return false
}

// holder returns a live client that holds the lock and has nothing in flight, or nil.
func (m *machine) holder() *pclient {
	for _, c := range m.clients {
		if !c.dead && c.holding && c.op == "" {
			return c
		}
	}
	return nil
}

// othersWaiting reports whether a client other than c has an acquire in flight. A
// fault that ends c's session while c holds would then let that client in before c
// can possibly hear of it: the gap no ZooKeeper lock closes (only fencing does), so
// the property does not ask for it.
func (m *machine) othersWaiting(c *pclient) bool {
	for _, o := range m.clients {
		if o != c && !o.dead && o.op == histories.FAcquire {
			return true
		}
	}
	return false
}

// isFault reports whether a step kind is a fault (drawn by the property's one fault
// action).
func isFault(kind string) bool {
	switch kind {
	case stepExpire, stepKill, stepCut, stepReplyLoss, stepWakeLoss:
		return true
	}
	return false
}

// stepKinds lists every step kind.
func stepKinds() []string {
	return []string{stepAcquire, stepRelease, stepTimeout, stepWait, stepExpire, stepKill, stepCut, stepReplyLoss, stepWakeLoss}
}

// do applies one step. It returns an error when the step is not possible now (a
// replayed schedule that no longer fits) or the harness broke.
func (m *machine) do(s pstep) error {
	if s.Client < 0 || s.Client >= len(m.clients) {
		return fmt.Errorf("step %s: no client c%d", s, s.Client)
	}
	c := m.clients[s.Client]
	if !m.possible(s.Kind, c) {
		return fmt.Errorf("step %s is not possible now (%s)", s, m.state())
	}
	m.steps = append(m.steps, s)
	m.note("step %d: %s", len(m.steps), s)
	st := m.st
	switch s.Kind {
	case stepWait:
		m.settle(s.D)
	case stepAcquire:
		m.request(c, histories.FAcquire, workloads.Request{Op: workloads.OpAcquire, TimeoutMS: s.D.Milliseconds()})
		if !m.pump(propSettle, func() bool { return c.op == "" || c.dead }) {
			m.note("%s: waiting", c.name())
		}
	case stepRelease:
		m.request(c, histories.FRelease, workloads.Request{Op: workloads.OpRelease})
		m.await(c, m.replyBound(0))
		m.settle(propSettle)
	case stepTimeout:
		m.request(c, histories.FAcquire, workloads.Request{Op: workloads.OpAcquire, TimeoutMS: s.D.Milliseconds()})
		m.await(c, m.replyBound(s.D))
	case stepExpire:
		holding := c.holding
		if err := m.fault(c, "session-expire", 0, nemesis.SessionExpire{Target: nemesis.TargetRandomClient, SessionTimeout: st}); err != nil {
			return err
		}
		m.afterFault(c, holding)
	case stepKill:
		m.settle(0)
		if !c.dead {
			m.recordNemesis("start", map[string]any{"fault": "client-kill", "process": c.process})
			c.w.Kill()
			m.crashed(c, errors.New("killed (client-kill)"))
			m.recordNemesis("stop", map[string]any{"fault": "client-kill", "process": c.process})
		}
	case stepCut:
		holding := c.holding
		if err := m.fault(c, "client-partition", s.D, nemesis.ClientPartition{Target: nemesis.TargetRandomClient}); err != nil {
			return err
		}
		m.afterFault(c, holding)
	case stepReplyLoss:
		// The table first, then the acquire: its create reaches the servers and is
		// applied, its reply does not come back.
		timeout := max(10*time.Second, 3*st)
		start := func() {
			m.request(c, histories.FAcquire, workloads.Request{Op: workloads.OpAcquire, TimeoutMS: timeout.Milliseconds()})
		}
		if err := m.faultDuring(c, "reply-loss", s.D, nemesis.ReplyLoss{Target: nemesis.TargetRandomClient}, start); err != nil {
			return err
		}
		if !m.pump(2*st+2*time.Second, func() bool { return c.op == "" || c.dead }) {
			m.note("%s: still waiting", c.name())
		}
		m.settle(propSettle)
	case stepWakeLoss:
		h := m.holder()
		timeout := max(10*time.Second, 3*st)
		m.request(c, histories.FAcquire, workloads.Request{Op: workloads.OpAcquire, TimeoutMS: timeout.Milliseconds()})
		if m.pump(propSettle, func() bool { return c.op == "" || c.dead }) {
			break // not queued behind the holder (a broken recipe): nothing to wake
		}
		m.note("%s: waiting behind %s", c.name(), h.name())
		release := func() {
			m.note("%s releases while only watch notifications reach %s", h.name(), c.name())
			m.request(h, histories.FRelease, workloads.Request{Op: workloads.OpRelease})
			m.await(h, m.replyBound(0))
		}
		if err := m.faultDuring(c, "watches-only", s.D, nemesis.WatchesOnly{Target: nemesis.TargetRandomClient}, release); err != nil {
			return err
		}
		if !m.pump(2*st+2*time.Second, func() bool { return c.op == "" || c.dead }) {
			m.note("%s: still waiting", c.name())
		}
		m.settle(propSettle)
	default:
		return fmt.Errorf("unknown step %q", s.Kind)
	}
	return m.replaceDead()
}

// fault applies f to the client's worker, keeps it on for d (handling messages), and
// takes it back.
func (m *machine) fault(c *pclient, class string, d time.Duration, f nemesis.Fault) error {
	return m.faultDuring(c, class, d, f, nil)
}

// faultDuring is fault with during called right after the fault is applied.
func (m *machine) faultDuring(c *pclient, class string, d time.Duration, f nemesis.Fault, during func()) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target := aimed{cluster: m.env.cl, target: m.env.cl.client(c.w)}
	applied, err := f.Apply(ctx, target, rand.New(rand.NewPCG(uint64(len(m.steps)), 1)))
	value := applied.Value
	if value == nil {
		value = map[string]any{}
	}
	value["fault"] = class
	if err != nil {
		value["error"] = err.Error()
	}
	m.recordNemesis("start", value)
	if err != nil {
		_ = applied.Undo(ctx)
		if class == "session-expire" && strings.Contains(err.Error(), "refused session") {
			// The session ended already (a recipe that reconnected meanwhile).
			m.note("%s: %v", class, err)
			m.recordNemesis("stop", value)
			return nil
		}
		return fmt.Errorf("%s on %s: %w", class, c.name(), err)
	}
	m.undos = append(m.undos, applied.Undo)
	m.note("%s on %s (%v)", class, c.name(), value)
	if during != nil {
		during()
	}
	m.settle(d)
	uerr := applied.Undo(ctx)
	m.undos = m.undos[:len(m.undos)-1]
	m.recordNemesis("stop", value)
	if uerr != nil {
		return fmt.Errorf("undo %s: %w", class, uerr)
	}
	if d > 0 {
		m.note("%s healed", class)
	}
	return nil
}

// afterFault waits until a client that held before a fault is consistent again: it
// was told it lost the lock, or its session still owns a lock node. A holder whose
// node is gone and who is never told is a zombie: the next waiter would be let in
// while it believes it holds.
func (m *machine) afterFault(c *pclient, held bool) {
	if held && !c.dead {
		bound := 2*m.st + 2*time.Second
		ok := m.pumpPoll(bound, func() bool {
			return c.dead || !c.holding || m.ownsNode(c)
		})
		if !ok {
			m.setFail(pfail(failZombie, "%s was told ok at %.3fs; its session no longer owns a node under %s, and %s after the fault it was still not told it lost the lock",
				c.name(), c.okAt.Seconds(), m.path, bound))
		}
	}
	m.settle(propSettle)
}

// replaceDead starts a new worker in every slot whose worker died.
func (m *machine) replaceDead() error {
	for _, c := range m.clients {
		if c.dead {
			if err := m.startWorker(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// lockNode is a child of the lock path and its owner.
type lockNode struct {
	Name  string
	Owner string
}

// nodes lists the lock path's children (after a sync) with their ephemeral owners.
func (m *machine) nodes() ([]lockNode, error) {
	conn := m.env.conn
	if _, err := conn.Sync(m.path); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("sync %s: %w", m.path, err)
	}
	children, _, err := conn.Children(m.path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", m.path, err)
	}
	slices.SortFunc(children, func(a, b string) int { return zookeeper.SeqOf(a) - zookeeper.SeqOf(b) })
	var out []lockNode
	for _, ch := range children {
		ok, stat, err := conn.Exists(m.path + "/" + ch)
		if err != nil {
			return nil, fmt.Errorf("exists %s: %w", ch, err)
		}
		if ok {
			out = append(out, lockNode{Name: ch, Owner: fmt.Sprintf("0x%x", uint64(stat.EphemeralOwner))})
		}
	}
	return out, nil
}

// ownsNode reports whether the client's current session owns a lock node.
func (m *machine) ownsNode(c *pclient) bool {
	nodes, err := m.nodes()
	if err != nil {
		return true // cannot tell: assume the best, the history check still runs
	}
	id := c.session()
	for _, n := range nodes {
		if n.Owner == id {
			return true
		}
	}
	return false
}

// describe renders nodes with who owns them.
func (m *machine) describe(nodes []lockNode) string {
	if len(nodes) == 0 {
		return "none"
	}
	var parts []string
	for _, n := range nodes {
		who := m.owners[n.Owner]
		if who == "" {
			who = "an unknown session"
		}
		live := ""
		for _, c := range m.clients {
			if !c.dead && c.session() == n.Owner {
				live = fmt.Sprintf(", the live session of %s (holding %v, op %q, told lost %v, kept after info %v)",
					c.name(), c.holding, c.op, c.lostHold, c.uncertain)
			}
		}
		parts = append(parts, fmt.Sprintf("%s owned by %s = %s%s", n.Name, n.Owner, who, live))
	}
	return strings.Join(parts, "; ")
}

// state is a one-line summary of the clients.
func (m *machine) state() string {
	var parts []string
	for _, c := range m.clients {
		s := fmt.Sprintf("%s p%d", c.name(), c.process)
		switch {
		case c.dead:
			s += " dead"
		case c.op != "":
			s += " " + c.op + "..."
		case c.holding:
			s += " holding"
		case c.lostHold:
			s += " lost"
		default:
			s += " idle"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// checkExclusion is the invariant after every step: at most one client holds (told
// ok, and neither released nor told it lost the lock since).
func (m *machine) checkExclusion() *propFailure {
	var holders []*pclient
	for _, c := range m.clients {
		if !c.dead && c.holding {
			holders = append(holders, c)
		}
	}
	if len(holders) < 2 {
		return nil
	}
	var who []string
	for _, c := range holders {
		who = append(who, fmt.Sprintf("%s (process %d, session %s) told ok at %.3fs", c.name(), c.process, c.session(), c.okAt.Seconds()))
	}
	nodes, err := m.nodes()
	servers := m.describe(nodes)
	if err != nil {
		servers = err.Error()
	}
	verdict := "models: "
	if res, err := models.Check(m.hist, models.Config{Kind: models.Mutex}); err != nil {
		verdict += "cannot check: " + err.Error()
	} else {
		verdict += string(res.Verdict) + ": " + witness(res)
	}
	return pfail(failExclusion, "%s both hold, neither told it lost the lock; lock nodes: %s; %s",
		strings.Join(who, " and "), servers, verdict)
}

// checkOrphans is the invariant after every step that no lock node is orphaned:
// every node of a live client's current session belongs to a client that holds,
// waits (has an op in flight), or was told it lost the lock and has not released
// since. A node of a client that holds nothing and asks for nothing blocks every
// waiter for as long as its session lives. (A killed or retired worker's session
// lives on for one session timeout; its node goes with it.)
func (m *machine) checkOrphans() *propFailure { return m.orphans(m.rec.Strict) }

// orphans is checkOrphans; strict holds clients kept after an info to it too.
func (m *machine) orphans(strict bool) *propFailure {
	nodes, err := m.nodes()
	if err != nil {
		return nil // cannot tell now; the final phase looks again
	}
	for _, n := range nodes {
		for _, c := range m.clients {
			if c.dead || c.session() != n.Owner || c.op != "" || c.holding || c.lostHold {
				continue
			}
			if c.uncertain && !strict {
				continue // its op's effect is unknown: its next acquire may clean up
			}
			return pfail(failOrphan, "%s holds nothing and asks for nothing, yet its live session owns a lock node: %s", c.name(), m.describe(nodes))
		}
	}
	return nil
}

func witness(res models.Result) string {
	for _, k := range res.Keys {
		if k.Witness != "" {
			return k.Witness
		}
	}
	return string(res.Verdict)
}

// finish runs the final phase, with faults off: every op in flight answered, every
// hold released; then every client in turn must acquire within the liveness bound
// and release; then no lock node may be left while every client is idle, nor once
// every session is gone; and the history must be linearizable for models' mutex.
func (m *machine) finish() *propFailure {
	if m.fail != nil {
		return m.fail
	}
	st := m.st
	m.note("final phase: faults off (%s)", m.state())
	if err := m.undoAll(); err != nil {
		return pfail(failHarness, "heal: %v", err)
	}
	if err := m.replaceDead(); err != nil {
		return pfail(failHarness, "%v", err)
	}
	for _, c := range m.clients {
		if c.op != "" {
			m.await(c, m.replyBound(max(10*time.Second, 3*st)))
		}
	}
	for _, c := range m.clients {
		switch {
		case c.dead:
		case c.holding || c.lostHold:
			m.request(c, histories.FRelease, workloads.Request{Op: workloads.OpRelease})
			m.await(c, m.replyBound(0))
		case c.uncertain:
			// Not recorded: the kept worker's process has no hold in the history.
			m.request(c, "cleanup", workloads.Request{Op: workloads.OpRelease})
			m.await(c, m.replyBound(0))
		}
	}
	if err := m.replaceDead(); err != nil {
		return pfail(failHarness, "%v", err)
	}
	if f := m.checkExclusion(); f != nil {
		return f
	}
	// Not strict here: a node a kept client left behind is the liveness turns' to
	// judge (strict puts those clients last, so the node must not block the others).
	if f := m.orphans(false); f != nil {
		return f
	}
	// Liveness: a killed worker's session lives one session timeout; every client
	// gets its turn after that. Clients kept after an info go first (their next
	// acquire may clean up what the info'd op left), or, when strict, last (a node
	// one of them left behind must not block the others).
	bound := 2*st + 4*time.Second
	order := slices.Clone(m.clients)
	slices.SortStableFunc(order, func(a, b *pclient) int {
		first := func(c *pclient) bool { return c.uncertain != m.rec.Strict }
		switch {
		case first(a) == first(b):
			return 0
		case first(a):
			return -1
		}
		return 1
	})
	for _, c := range order {
		before, err := m.nodes()
		desc := m.describe(before)
		if err != nil {
			desc = err.Error()
		}
		m.note("final: %s acquires (bound %s); lock nodes: %s", c.name(), bound, desc)
		m.request(c, histories.FAcquire, workloads.Request{Op: workloads.OpAcquire, TimeoutMS: bound.Milliseconds()})
		m.await(c, m.replyBound(bound))
		if c.dead || c.reply.Type != workloads.ReplyOK || !c.holding {
			return pfail(failLiveness, "with faults off, %s did not acquire within %s (%s %s); lock nodes when it began: %s",
				c.name(), bound, c.reply.Type, c.reply.Error, desc)
		}
		if f := m.checkExclusion(); f != nil {
			return f
		}
		m.request(c, histories.FRelease, workloads.Request{Op: workloads.OpRelease})
		m.await(c, m.replyBound(0))
		if err := m.replaceDead(); err != nil {
			return pfail(failHarness, "%v", err)
		}
	}
	// Every client idle and released: a node of a live session is an orphan. (A
	// killed worker's session may still be alive: its node goes with it.)
	nodes, err := m.nodes()
	if err != nil {
		return pfail(failHarness, "%v", err)
	}
	for _, n := range nodes {
		for _, c := range m.clients {
			if !c.dead && c.session() == n.Owner {
				return pfail(failOrphan, "every client is idle and released, yet %s's live session owns a lock node: %s", c.name(), m.describe(nodes))
			}
		}
	}
	m.closeAll()
	var left []lockNode
	gone := m.pumpPoll(st+5*time.Second, func() bool {
		left, err = m.nodes()
		return err == nil && len(left) == 0
	})
	if !gone {
		return pfail(failOrphan, "every worker closed its session (and any killed one's timed out), yet lock nodes are left: %s", m.describe(left))
	}
	if err := histories.Validate(m.hist); err != nil {
		return pfail(failHarness, "the recorded history is malformed: %v", err)
	}
	res, err := models.Check(m.hist, models.Config{Kind: models.Mutex})
	if err != nil {
		return pfail(failHarness, "models cannot check the history: %v", err)
	}
	if res.Verdict != models.Valid {
		return pfail(failModel, "models' mutex checker finds the history %s: %s", res.Verdict, witness(res))
	}
	m.note("final phase passed: %d ops, models: %s", len(m.hist), res.Verdict)
	return nil
}

// closeAll asks every worker to close its session and exit.
func (m *machine) closeAll() {
	for _, c := range m.clients {
		if !c.dead {
			c.op = "close"
			c.dead = true
			c.w.Close(5 * time.Second)
		}
	}
}

func (m *machine) undoAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, u := range m.undos {
		errs = append(errs, u(ctx))
	}
	m.undos = nil
	return errors.Join(errs...)
}

// teardown ends every worker and fault of the run, whatever state it is in.
func (m *machine) teardown() {
	if m.torn {
		return
	}
	m.torn = true
	_ = m.undoAll()
	close(m.stop)
	for _, c := range m.clients {
		if c.w != nil {
			c.w.Kill()
		}
	}
}

// report renders the run: schedule, then trace.
func (m *machine) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule: %s\n", schedule{Clients: len(m.clients), Steps: m.steps})
	for _, l := range m.trace {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// createPath creates the persistent node p and its missing parents.
func createPath(conn *zk.Conn, p string) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		sub := "/" + strings.Join(parts[:i+1], "/")
		if _, err := conn.Create(sub, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", sub, err)
		}
	}
	return nil
}

// workerLogs returns the last n lines of every worker log of the run.
func (m *machine) workerLogs(n int) string {
	files, _ := filepath.Glob(filepath.Join(m.dir, "*.stderr.log"))
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s:\n", filepath.Base(f))
		for _, l := range lockservice.TailLines(f, n) {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

// tailFile returns the last n lines of a file, joined by " | ".
func tailFile(path string, n int) string {
	return strings.Join(lockservice.TailLines(path, n), " | ")
}
