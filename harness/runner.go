package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// runner drives the workload through the worker slots of one run.
type runner struct {
	cfg      Config
	dir      string
	rec      *recorder
	connect  string
	lockPath string
	logf     func(string, ...any)
	cluster  *cluster
	// judged is closed once the final phase was judged: workers may then go.
	judged chan struct{}
	// finalsLeft counts slots that have not reported their final cycle.
	finalsLeft sync.WaitGroup
	// skipFinal is set before final is closed when there is no final phase.
	skipFinal atomic.Bool
	// initOK is set once any worker was initialised.
	initOK atomic.Bool

	mu          sync.Mutex
	nextProcess int
	finals      map[int]finalResult
	// sessions maps every session id a worker reported to its process.
	sessions map[string]int
}

// refusedError is a worker's certain refusal of its init.
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

// counterPath is the counter workload's znode ("" for other workloads).
func (r *runner) counterPath() string {
	if r.cfg.Workload.Kind != workloads.Counter {
		return ""
	}
	return r.lockPath + "-counter"
}

// prepareCounter creates the counter znode holding 0 (with its parents).
func (r *runner) prepareCounter(ctx context.Context, ens *Ensemble) error {
	path := r.counterPath()
	if path == "" {
		return nil
	}
	conn, err := ens.Client(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return fmt.Errorf("counter: %w", err)
	}
	defer conn.Close()
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		data := []byte{}
		if p == path {
			data = []byte("0")
		}
		if _, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("counter: create %s: %w", p, err)
		}
	}
	return nil
}

// recordCounterFinal reads the counter at the end and records it as a nemesis op,
// so the checker can compare it with the acknowledged increments.
func (r *runner) recordCounterFinal(ctx context.Context, ens *Ensemble) error {
	path := r.counterPath()
	if path == "" {
		return nil
	}
	conn, err := ens.Client(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return fmt.Errorf("final counter read: %w", err)
	}
	defer conn.Close()
	data, _, err := conn.Get(path)
	if err != nil {
		return fmt.Errorf("final counter read: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return fmt.Errorf("final counter read: %q is not a number", data)
	}
	value, _ := json.Marshal(map[string]int64{"value": n})
	r.rec.record(histories.Op{Type: histories.Info, F: "counter-final", Key: workloads.CounterKey,
		Process: histories.NemesisProcess, Value: value})
	r.logf("counter: final value %d", n)
	return nil
}

// recordNemesis writes a fault's start or stop as a nemesis op.
func (r *runner) recordNemesis(ev nemesis.Event) {
	value := map[string]any{"fault": string(ev.Fault)}
	for k, v := range ev.Value {
		value[k] = v
	}
	if ev.Err != "" {
		value["error"] = ev.Err
	}
	data, err := json.Marshal(value)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"fault": string(ev.Fault), "error": err.Error()})
	}
	r.rec.record(histories.Op{Type: histories.Info, F: string(ev.Phase), Process: histories.NemesisProcess, Value: data})
	desc := string(ev.Phase) + " " + string(data)
	r.logf("nemesis: %s", desc)
}

// workerStarted and workerEnded keep the nemesis's view of live workers current.
func (r *runner) workerStarted(slot int, w *worker) {
	record := func(id string) {
		r.mu.Lock()
		r.sessions[id] = w.process
		r.mu.Unlock()
	}
	w.mu.Lock()
	w.onSession = record
	id := w.sessionID
	w.mu.Unlock()
	if id != "" {
		record(id)
	}
	r.cluster.setWorker(slot, w)
}

func (r *runner) workerEnded(slot int) { r.cluster.setWorker(slot, nil) }

// sessionOwners returns a copy of the session id → process map.
func (r *runner) sessionOwners() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.sessions)
}

// workerView is a current worker as the final phase and the orphan watch see it: its
// slot, whether it holds the lock, and whether it is thinking (and which thinking
// spell).
type workerView struct {
	slot      int
	holding   bool
	idle      bool
	idleSpell int64
}

// workerViews returns the current workers (one per slot) by process id.
func (r *runner) workerViews() map[int]workerView {
	r.cluster.mu.Lock()
	defer r.cluster.mu.Unlock()
	views := make(map[int]workerView, len(r.cluster.workers))
	for slot, w := range r.cluster.workers {
		views[w.process] = workerView{slot: slot, holding: w.holding.Load(), idle: w.idle.Load(), idleSpell: w.idleSpells.Load()}
	}
	return views
}

// isHolding reports whether process is a current worker that holds the lock.
func (r *runner) isHolding(process int) bool { return r.workerViews()[process].holding }

func (r *runner) newProcess() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.nextProcess
	r.nextProcess++
	return p
}

// slotRNG gives each slot its own stream derived from the run's seed.
func (r *runner) slotRNG(slot int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(slot)+1))
}

// slot runs worker processes in one namespace, one after the other, until ctx ends:
// a worker whose op ends in info, or that crashes, is replaced by a fresh process
// with a new process id. Then, once final is closed (nil: no final phase), the slot's
// worker (or a fresh one) must acquire and release the lock once.
func (r *runner) slot(ctx context.Context, hard, final <-chan struct{}, slot int, host netns.Host) error {
	rng := r.slotRNG(slot)
	var s *session
	defer func() {
		if s != nil {
			s.end()
		}
	}()
	for ctx.Err() == nil {
		if s == nil || s.dead {
			if s != nil {
				s.end()
			}
			var err error
			if s, err = r.startSession(ctx, hard, slot, host); err != nil {
				return err
			}
			if s == nil {
				continue // ctx ended while starting
			}
		}
		s.loop(ctx, rng)
	}
	reported := false
	defer func() {
		if !reported {
			r.setFinal(slot, finalResult{Slot: slot + 1, Reply: "none", Error: "the slot ended before the final phase"})
		}
	}()
	select {
	case <-final:
	case <-hard:
		return nil
	}
	if r.skipFinal.Load() {
		return nil
	}
	if s == nil || s.dead {
		if s != nil {
			s.end()
		}
		var err error
		if s, err = r.startSession(context.Background(), hard, slot, host); err != nil || s == nil {
			reported = true
			r.setFinal(slot, finalResult{Slot: slot + 1, Reply: "no worker", Error: fmt.Sprint(err)})
			return nil
		}
	}
	reported = true
	r.setFinal(slot, s.finalCycle())
	select {
	case <-r.judged:
	case <-hard:
	}
	return nil
}

// startSession starts a worker process in the slot and initialises it, retrying a few
// times. It returns nil, nil when ctx ended first.
func (r *runner) startSession(ctx context.Context, hard <-chan struct{}, slot int, host netns.Host) (*session, error) {
	for failures := 0; ; {
		if ctx.Err() != nil {
			return nil, nil
		}
		select {
		case <-hard:
			return nil, nil
		default:
		}
		process := r.newProcess()
		logPath := filepath.Join(r.dir, "workers", fmt.Sprintf("w%d-p%d.stderr.log", slot+1, process))
		w, err := startWorker(host, slot, process, r.cfg.WorkerArgv, logPath)
		if err != nil {
			return nil, err
		}
		s := &session{r: r, w: w, hard: hard, key: r.cfg.Workload.Key}
		if err := s.init(slot); err != nil {
			w.kill()
			var refused refusedError
			if errors.As(err, &refused) && !r.initOK.Load() {
				// Before any worker started, a certain refusal is the configuration's
				// fault (an unsupported kind, fencing the recipe cannot do); later it
				// may be a fault's (no server reachable), and the slot retries.
				return nil, fmt.Errorf("recipe %s refused the workload: %w (see %s)", r.cfg.Recipe, err, logPath)
			}
			failures++
			r.logf("worker %d (slot %d) did not start: %v (see %s)", process, slot+1, err, logPath)
			if failures >= 5 {
				return nil, fmt.Errorf("worker slot %d: %d workers in a row failed to start; last: %w (see %s)", slot+1, failures, err, logPath)
			}
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		r.initOK.Store(true)
		r.workerStarted(slot, w)
		return s, nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
