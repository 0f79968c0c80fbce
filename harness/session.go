package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// end stops the session's worker: politely unless it is dead.
func (s *session) end() {
	s.r.workerEnded(s.w.slot)
	if s.dead {
		s.w.kill()
	} else {
		s.w.close(2 * time.Second)
	}
}

// session is one worker process's life: it owns the process's history entries.
type session struct {
	r    *runner
	w    *worker
	hard <-chan struct{}
	key  string

	holding bool
	mode    string
	// opKey is the key of the op in flight (the lock's key, or the counter's).
	opKey string
	// dead: the process crashed or must not be used again (after info).
	dead bool
}

// setHolding tracks whether the worker certainly holds the lock, for the loop and
// for the nemesis (which aims at the holder).
func (s *session) setHolding(v bool) {
	s.holding = v
	s.w.holding.Store(v)
}

func (s *session) op(t histories.Type, f string) histories.Op {
	key, mode := s.opKey, s.mode
	if key == "" {
		key = s.key
	}
	if key != s.key {
		mode = ""
	}
	return histories.Op{Type: t, F: f, Process: histories.Client(s.w.process), Key: key, Mode: mode}
}

// init sends the init request; it is not part of the history.
func (s *session) init(slot int) error {
	wl := s.r.cfg.Workload
	_, err := s.w.send(workloads.Request{
		Op: workloads.OpInit, Connect: s.r.connect, SessionTimeoutMS: s.r.cfg.SessionTimeout.Milliseconds(),
		Path: s.r.lockPath, Kind: string(wl.Kind), Permits: wl.Permits, Worker: s.w.process,
		CounterPath: s.r.counterPath(), Fenced: wl.Fenced, WriteRetryMS: max(0, wl.WriteRetry.Milliseconds()),
	})
	if err != nil {
		return err
	}
	reply, crashed := s.await(2*s.r.cfg.SessionTimeout + 10*time.Second)
	if crashed != nil {
		return crashed
	}
	if reply.Type != workloads.ReplyOK {
		err := fmt.Errorf("init: %s: %s", reply.Type, reply.Error)
		if reply.Type == workloads.ReplyFail {
			// A worker that certainly refuses its configuration (an unsupported kind,
			// fencing it cannot do) will refuse it again: no point retrying.
			return refusedError{err}
		}
		return err
	}
	return nil
}

// await waits for the reply to the request in flight, handling events meanwhile. It
// returns a non-nil error when the worker crashed, did not answer within limit, or the
// run ended hard; the worker is then unusable.
func (s *session) await(limit time.Duration) (workloads.Message, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case m := <-s.w.msgs:
			if m.crashed != nil {
				return workloads.Message{}, m.crashed
			}
			if m.msg.Event != "" {
				s.event(m.msg, true)
				continue
			}
			return m.msg, nil
		case <-timer.C:
			return workloads.Message{}, fmt.Errorf("no reply within %s", limit)
		case <-s.hard:
			return workloads.Message{}, errors.New("run ended before the reply came")
		}
	}
}

// event handles an event from the worker.
func (s *session) event(m workloads.Message, inFlight bool) {
	if m.Event != workloads.EventLost {
		return
	}
	if !s.holding || inFlight {
		// Nothing certain to end: the op in flight (if any) decides.
		s.r.logf("worker %d: lost event while not holding (ignored): %s", s.w.process, m.Error)
		return
	}
	inv := s.op(histories.Invoke, histories.FRelease)
	inv.Lost, inv.Error = true, m.Error
	s.r.rec.record(inv)
	done := s.op(histories.OK, histories.FRelease)
	done.Lost, done.Error = true, m.Error
	s.r.rec.record(done)
	s.setHolding(false)
}

// crash records the end of a worker that died or must be abandoned: its open op
// completes as info; a hold it had ends at some unknown time from now (a release
// invoke now, completed as info).
func (s *session) crash(openOp string, why error) {
	s.dead = true
	if openOp != "" {
		op := s.op(histories.Info, openOp)
		op.Error = why.Error()
		s.r.rec.record(op)
	}
	// A hold that was on ends at some unknown time from now. (The open op was on the
	// lock's key if it was a release; if it was a counter read or write, the lock is
	// still held and released here, on the lock's key.)
	if s.holding && (openOp == "" || s.opKey != s.key) {
		s.opKey = s.key
		s.r.rec.record(s.op(histories.Invoke, histories.FRelease))
		op := s.op(histories.Info, histories.FRelease)
		op.Error = why.Error()
		s.r.rec.record(op)
	}
	s.opKey = s.key
	s.holding = false
	s.w.holding.Store(false)
}

// call performs one recorded lock operation and returns the reply type ("" when the
// worker crashed or did not answer).
func (s *session) call(f string, req workloads.Request, limit time.Duration) string {
	reply, _ := s.callOn(s.key, f, nil, req, limit)
	return reply.Type
}

// callOn performs one recorded operation on key: invoke (with value), request, and
// the completion the reply says. A crash completes the op as info.
func (s *session) callOn(key, f string, value json.RawMessage, req workloads.Request, limit time.Duration) (workloads.Message, bool) {
	s.opKey = key
	inv := s.op(histories.Invoke, f)
	inv.Value = value
	s.r.rec.record(inv)
	if _, err := s.w.send(req); err != nil {
		s.crash(f, fmt.Errorf("write to worker: %w", err))
		return workloads.Message{}, false
	}
	reply, err := s.await(limit)
	if err != nil {
		s.crash(f, err)
		return workloads.Message{}, false
	}
	op := s.op(histories.Type(reply.Type), f)
	op.Error = reply.Error
	if reply.Type == workloads.ReplyOK {
		switch {
		case len(reply.Token) > 0:
			op.Value = json.RawMessage(`{"token":` + string(reply.Token) + `}`)
		case reply.Value != nil:
			op.Value = strconv.AppendInt(nil, *reply.Value, 10)
		}
	}
	s.r.rec.record(op)
	s.opKey = s.key
	if reply.Type == workloads.ReplyInfo {
		s.dead = true
	}
	return reply, true
}

// loop runs lock cycles until the run's time is up or the worker is unusable.
func (s *session) loop(ctx context.Context, rng *rand.Rand) {
	wl := s.r.cfg.Workload
	// A recipe may need its session timeout more than once to answer honestly (gozk's
	// timed-out acquire closes its session and opens a new one before replying).
	limit := wl.AcquireTimeout + 3*s.r.cfg.SessionTimeout + 5*time.Second
	for ctx.Err() == nil && !s.dead {
		plan := wl.Next(rng)
		s.mode = plan.Request.Mode
		if s.call(histories.FAcquire, plan.Request, limit) != workloads.ReplyOK {
			continue
		}
		s.setHolding(true)
		depth := 1
		// Reentrant: acquire again while holding.
		for depth < plan.Depth && !s.dead && s.holding {
			if s.call(histories.FAcquire, plan.Request, limit) != workloads.ReplyOK {
				break
			}
			depth++
		}
		// The counter workload's critical section is read, think (the hold), write:
		// a holder paused or cut off while thinking writes a stale value unless fenced.
		var read *int64
		if wl.Kind == workloads.Counter && !s.dead && s.holding {
			read = s.readCounter(limit)
		}
		if !s.dead && s.holding {
			s.hold(plan.Hold)
		}
		if read != nil && !s.dead && s.holding {
			s.writeCounter(*read+1, limit)
		}
		for depth > 0 && !s.dead && s.holding {
			if depth == 1 {
				// The certain part of the hold ends when the outermost release is invoked.
				s.w.holding.Store(false)
			}
			reply := s.call(histories.FRelease, workloads.Request{Op: workloads.OpRelease}, limit)
			depth--
			if reply != workloads.ReplyOK {
				break // a failed release ends the hold: the lock was already lost
			}
		}
		if !s.dead {
			s.setHolding(false)
			s.think(wl.Think(rng))
		}
	}
}

// think waits between two lock cycles, handling events; the nemesis may aim at a
// thinking worker (its next request is an acquire).
func (s *session) think(d time.Duration) {
	if d <= 0 {
		return
	}
	s.w.idleSpells.Add(1)
	s.w.idle.Store(true)
	defer s.w.idle.Store(false)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case m := <-s.w.msgs:
			if m.crashed != nil {
				s.crash("", m.crashed)
				return
			}
			s.event(m.msg, false)
		case <-s.hard:
			return
		}
	}
}

// readCounter reads the counter; nil unless the read succeeded.
func (s *session) readCounter(limit time.Duration) *int64 {
	reply, ok := s.callOn(workloads.CounterKey, histories.FRead, nil, workloads.Request{Op: workloads.OpRead}, limit)
	if !ok || reply.Type != workloads.ReplyOK || reply.Value == nil {
		return nil
	}
	return reply.Value
}

// writeCounter writes next to the counter (fenced or not, as the worker was told at
// init).
func (s *session) writeCounter(next int64, limit time.Duration) {
	_, _ = s.callOn(workloads.CounterKey, histories.FWrite, strconv.AppendInt(nil, next, 10),
		workloads.Request{Op: workloads.OpWrite, Value: &next}, limit)
}

// hold sleeps while holding, handling events; the worker may crash or report lost.
// The hold is not cut short when the run's time is up: release comes after it. A
// stopped worker (SIGSTOP, a "GC pause") cannot end its critical section, so its hold
// lasts at least until it runs again: only a running worker is sent its next op
// (resumeMidHold).
func (s *session) hold(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			if processStopped(s.w.Pid()) {
				s.resumeMidHold()
			}
			return
		case m := <-s.w.msgs:
			if !s.heldAfter(m) {
				return
			}
		case <-s.hard:
			s.crash("", errors.New("run ended while holding"))
			return
		}
	}
}

// heldAfter handles a message that came while holding (a crash, or an event such as
// lost) and says whether the worker still holds.
func (s *session) heldAfter(m workerMsg) bool {
	if m.crashed != nil {
		s.crash("", m.crashed)
		return false
	}
	s.event(m.msg, false)
	return s.holding
}

// resumeMidHold waits, without handling the worker's events, until a worker stopped
// in its critical section runs again. Like a program after a GC pause, it carries on
// where it was at once (its write, its release) before anything it hears on resuming
// (a lost lock) can stop it; such an event arrives while that op is in flight, and
// the op's outcome decides. Events sent before the stop are handled first.
func (s *session) resumeMidHold() {
	for drained := false; !drained; {
		select {
		case m := <-s.w.msgs:
			if !s.heldAfter(m) {
				return
			}
		default:
			drained = true
		}
	}
	for processStopped(s.w.Pid()) {
		select {
		case <-s.hard:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// processStopped reports whether pid is stopped by a signal (state T in
// /proc/PID/stat).
func processStopped(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] == 'T' || data[i+2] == 't'
}
