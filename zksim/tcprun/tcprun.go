// Package tcprun runs worker-protocol workers (Curator's, Kazoo's, any recipe's)
// against the wire simulator's TCP server: each worker acquires, holds for a random
// while and releases, over and over, while the server injects its faults; every
// operation is recorded as the harness records it, and the history is checked by
// models' mutex checker. No ZooKeeper, no namespaces, no root: a fast smoke test of a
// client library under lost replies, dropped requests, stalls and expiries, which is
// not reproducible (the processes race in real time).
package tcprun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// Config says what Run runs.
type Config struct {
	// Argv starts one worker process.
	Argv []string
	// Connect is the server's address, sent in init.
	Connect string
	// Workers is how many workers cycle at once.
	Workers int
	// Duration is how long they cycle.
	Duration time.Duration
	// SessionTimeout is sent in init.
	SessionTimeout time.Duration
	// HoldMax bounds a hold; AcquireTimeout an acquire's wait.
	HoldMax, AcquireTimeout time.Duration
	// Path is the lock's znode.
	Path string
	// Seed seeds the holds.
	Seed uint64
}

// Validate reports a config Run cannot use.
func (c Config) Validate() error {
	switch {
	case len(c.Argv) == 0:
		return errors.New("tcprun: no worker command")
	case c.Connect == "" || c.Path == "":
		return errors.New("tcprun: Connect and Path are required")
	case c.Workers < 1 || c.Duration <= 0 || c.SessionTimeout <= 0 || c.HoldMax <= 0 || c.AcquireTimeout <= 0:
		return errors.New("tcprun: Workers, Duration, SessionTimeout, HoldMax and AcquireTimeout must be positive")
	}
	return nil
}

// Result is a run's history and verdict.
type Result struct {
	History histories.History
	Check   models.Result
	// Acquired counts the acquires that succeeded; Retired the workers replaced
	// after an unknown outcome or a broken worker.
	Acquired, Retired int
}

// recorder appends ops to the history, in order, from every slot.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	hist  histories.History
	procs int
}

func (r *recorder) add(proc int, t histories.Type, f string, edit func(*histories.Op)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := histories.Op{Index: int64(len(r.hist)), Time: time.Since(r.start).Nanoseconds(), Type: t, F: f, Process: histories.Client(proc)}
	if edit != nil {
		edit(&op)
	}
	r.hist = append(r.hist, op)
}

func (r *recorder) newProc() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs++
	return r.procs - 1
}

// Run cycles cfg.Workers workers for cfg.Duration and checks the history.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	rec := &recorder{start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var res Result
	var firstErr error
	for slot := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &slotRun{cfg: cfg, rec: rec, slot: slot, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(slot)))}
			err := s.loop(ctx)
			mu.Lock()
			defer mu.Unlock()
			res.Acquired += s.acquired
			res.Retired += s.retired
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	res.History = rec.hist
	if firstErr != nil {
		return res, firstErr
	}
	check, err := models.Check(res.History, models.Config{Kind: models.Mutex})
	res.Check = check
	return res, err
}

// slotRun is one slot's worker after worker.
type slotRun struct {
	cfg      Config
	rec      *recorder
	slot     int
	rng      *rand.Rand
	w        *driver.Worker
	proc     int
	holding  bool
	acquired int
	retired  int
}

func (s *slotRun) bounds() driver.Bounds { return driver.Bounds{SessionTimeout: s.cfg.SessionTimeout} }

// loop cycles until ctx ends, then closes the worker.
func (s *slotRun) loop(ctx context.Context) error {
	defer func() {
		if s.w != nil {
			s.w.Close(2*s.cfg.SessionTimeout + 2*time.Second)
		}
	}()
	for ctx.Err() == nil {
		if s.w == nil {
			if err := s.start(); err != nil {
				return err
			}
		}
		s.cycle(ctx)
	}
	return nil
}

// start starts a new worker (a new process of the history) and inits it.
func (s *slotRun) start() error {
	w, err := driver.Start(driver.Command(s.cfg.Argv...), driver.Options{})
	if err != nil {
		return fmt.Errorf("tcprun: start worker: %w", err)
	}
	s.w, s.proc, s.holding = w, s.rec.newProc(), false
	init := workloads.Request{ID: w.NextID(), Op: workloads.OpInit, Connect: s.cfg.Connect,
		SessionTimeoutMS: s.cfg.SessionTimeout.Milliseconds(), Path: s.cfg.Path, Kind: string(workloads.Mutex), Permits: 1, Worker: s.slot + 1}
	m, err := s.call(init, s.bounds().InitReplyLimit())
	if err != nil || m.Msg.Type != workloads.ReplyOK {
		s.retire()
		return fmt.Errorf("tcprun: worker init: %v %s", err, m.Msg.Error)
	}
	return nil
}

// call sends req and waits for its reply, taking lost events meanwhile.
func (s *slotRun) call(req workloads.Request, limit time.Duration) (driver.Msg, error) {
	if err := s.w.Send(req); err != nil {
		return driver.Msg{}, err
	}
	return s.w.Await(driver.Wait{Limit: limit, OnEvent: s.onEvent})
}

// onEvent records a lost event while holding as the harness does: a release marked
// lost, invoked and completed at once.
func (s *slotRun) onEvent(m workloads.Message) {
	if m.Event != workloads.EventLost || !s.holding {
		return
	}
	lost := func(op *histories.Op) { op.Lost, op.Error = true, m.Error }
	s.rec.add(s.proc, histories.Invoke, histories.FRelease, lost)
	s.rec.add(s.proc, histories.OK, histories.FRelease, lost)
	s.holding = false
}

// cycle is one acquire, hold and release.
func (s *slotRun) cycle(ctx context.Context) {
	s.rec.add(s.proc, histories.Invoke, histories.FAcquire, nil)
	m, err := s.call(workloads.Request{ID: s.w.NextID(), Op: workloads.OpAcquire, TimeoutMS: s.cfg.AcquireTimeout.Milliseconds()},
		s.bounds().ReplyLimit(s.cfg.AcquireTimeout))
	switch {
	case err == nil && m.Msg.Type == workloads.ReplyOK:
		s.rec.add(s.proc, histories.OK, histories.FAcquire, nil)
		s.holding = true
		s.acquired++
	case err == nil && m.Msg.Type == workloads.ReplyFail:
		s.rec.add(s.proc, histories.Fail, histories.FAcquire, func(op *histories.Op) { op.Error = m.Msg.Error })
		return
	default:
		s.rec.add(s.proc, histories.Info, histories.FAcquire, func(op *histories.Op) { op.Error = describe(m, err) })
		s.retire()
		return
	}
	s.hold(ctx)
	if !s.holding {
		return // told it lost the lock while holding
	}
	s.holding = false // the certain part of the hold ends at the release's invoke
	s.rec.add(s.proc, histories.Invoke, histories.FRelease, nil)
	m, err = s.call(workloads.Request{ID: s.w.NextID(), Op: workloads.OpRelease}, s.bounds().ReplyLimit(0))
	switch {
	case err == nil && m.Msg.Type == workloads.ReplyOK:
		s.rec.add(s.proc, histories.OK, histories.FRelease, nil)
	case err == nil && m.Msg.Type == workloads.ReplyFail:
		s.rec.add(s.proc, histories.Fail, histories.FRelease, func(op *histories.Op) { op.Error = m.Msg.Error })
	default:
		s.rec.add(s.proc, histories.Info, histories.FRelease, func(op *histories.Op) { op.Error = describe(m, err) })
		s.retire()
	}
}

// hold waits a random while up to HoldMax (or until ctx ends), taking lost events.
func (s *slotRun) hold(ctx context.Context) {
	timer := time.NewTimer(time.Duration(s.rng.Int64N(int64(s.cfg.HoldMax)) + 1))
	defer timer.Stop()
	for s.holding {
		select {
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case m := <-s.w.Lines():
			if m.Kind == driver.Event {
				s.onEvent(m.Msg)
			}
		}
	}
}

// retire kills the worker after an unknown outcome, as the harness does; the slot's
// next cycle starts a new one.
func (s *slotRun) retire() {
	if s.holding {
		// It may hold on: its hold ends at some unknown time from now.
		s.rec.add(s.proc, histories.Invoke, histories.FRelease, nil)
		s.rec.add(s.proc, histories.Info, histories.FRelease, func(op *histories.Op) { op.Error = "worker retired while holding" })
	}
	s.w.Kill()
	s.w, s.holding = nil, false
	s.retired++
}

func describe(m driver.Msg, err error) string {
	if err != nil {
		return err.Error()
	}
	if m.Msg.Error != "" {
		return m.Msg.Type + ": " + m.Msg.Error
	}
	return m.Msg.Type
}
