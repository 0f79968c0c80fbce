package workloads

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// drive runs a cycle to its end, answering each request from replies (by its op,
// "ok" when none is left) and counting a hold as "hold"; lostAtHold reports the lock
// lost during the hold. It returns the steps taken, as "op" or "op=reply", and the
// state seen while each step was in flight.
func drive(t *testing.T, c *Cycle, replies map[string][]string, lostAtHold bool) (steps, states []string) {
	t.Helper()
	for range 20 {
		step, more := c.Next()
		if !more {
			if c.State() != Between {
				t.Errorf("state after the cycle: %s, want between", c.State())
			}
			return steps, states
		}
		states = append(states, c.State().String())
		if step.IsHold() {
			steps = append(steps, "hold")
			if lostAtHold {
				c.Lost()
			}
			c.Done(Message{})
			continue
		}
		reply := ReplyOK
		if q := replies[step.Request.Op]; len(q) > 0 {
			reply, replies[step.Request.Op] = q[0], q[1:]
		}
		m := Message{Type: reply}
		if step.Request.Op == OpRead && reply == ReplyOK {
			v := int64(41)
			m.Value = &v
		}
		if step.Request.Op == OpWrite {
			steps = append(steps, "write:"+string(step.Value)+"="+reply)
		} else {
			steps = append(steps, step.Request.Op+"="+reply)
		}
		c.Done(m)
	}
	t.Fatal("the cycle did not end")
	return nil, nil
}

func TestCycle(t *testing.T) {
	mutex := Config{Kind: Mutex}.Defaults()
	reentrant := Config{Kind: Reentrant, MaxDepth: 3}.Defaults()
	counter := Config{Kind: Counter}.Defaults()
	deep := func(c Config, depth int) *Cycle {
		cy := c.NewCycle(rand.New(rand.NewPCG(1, 2)), 0)
		cy.depth = depth
		return cy
	}
	for _, tc := range []struct {
		name    string
		cycle   *Cycle
		replies map[string][]string
		lost    bool
		want    string
		states  string
	}{
		{name: "mutex", cycle: deep(mutex, 1), want: "acquire=ok hold release=ok", states: "acquiring holding releasing"},
		{name: "acquire fails", cycle: deep(mutex, 1), replies: map[string][]string{OpAcquire: {ReplyFail}}, want: "acquire=fail", states: "acquiring"},
		{name: "lost while holding", cycle: deep(mutex, 1), lost: true, want: "acquire=ok hold", states: "acquiring holding"},
		{name: "release fails", cycle: deep(mutex, 1), replies: map[string][]string{OpRelease: {ReplyFail}}, want: "acquire=ok hold release=fail", states: "acquiring holding releasing"},
		{name: "nested", cycle: deep(reentrant, 3), want: "acquire=ok acquire=ok acquire=ok hold release=ok release=ok release=ok",
			states: "acquiring holding holding holding holding holding releasing"},
		{name: "nested acquire fails: release the levels held", cycle: deep(reentrant, 3), replies: map[string][]string{OpAcquire: {ReplyOK, ReplyFail}},
			want: "acquire=ok acquire=fail hold release=ok", states: "acquiring holding holding releasing"},
		{name: "inner release fails ends the hold", cycle: deep(reentrant, 2), replies: map[string][]string{OpRelease: {ReplyFail}},
			want: "acquire=ok acquire=ok hold release=fail", states: "acquiring holding holding holding"},
		{name: "counter", cycle: deep(counter, 1), want: "acquire=ok read=ok hold write:42=ok release=ok", states: "acquiring holding holding holding releasing"},
		{name: "counter read fails: no write", cycle: deep(counter, 1), replies: map[string][]string{OpRead: {ReplyFail}},
			want: "acquire=ok read=fail hold release=ok", states: "acquiring holding holding releasing"},
		{name: "counter: lost while holding: no write, no release", cycle: deep(counter, 1), lost: true,
			want: "acquire=ok read=ok hold", states: "acquiring holding holding"},
		{name: "final", cycle: Config{Kind: RWLock}.Defaults().FinalCycle(time.Second), want: "acquire=ok release=ok", states: "acquiring releasing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, states := drive(t, tc.cycle, tc.replies, tc.lost)
			if got := strings.Join(steps, " "); got != tc.want {
				t.Errorf("steps: %s\nwant:  %s", got, tc.want)
			}
			if got := strings.Join(states, " "); got != tc.states {
				t.Errorf("states: %s\nwant:   %s", got, tc.states)
			}
			// Granted: whether the worker pauses (RefusedPause) before its next cycle.
			if want := strings.Contains(tc.want, "acquire=ok"); tc.cycle.Granted() != want {
				t.Errorf("granted %v, want %v", tc.cycle.Granted(), want)
			}
		})
	}
}

func TestFinalCycleAsksForTheWholeLock(t *testing.T) {
	for _, k := range Kinds() {
		c := Config{Kind: k}.Defaults().FinalCycle(3 * time.Second)
		step, _ := c.Next()
		if step.Request.Op != OpAcquire || step.Request.TimeoutMS != 3000 {
			t.Errorf("%s: final step %+v, want an acquire with a 3 s timeout", k, step.Request)
		}
		if want := map[Kind]string{RWLock: "write"}[k]; step.Request.Mode != want || step.Mode != want {
			t.Errorf("%s: final acquire's mode %q (op %q), want %q", k, step.Request.Mode, step.Mode, want)
		}
	}
}

func TestKindCatalogue(t *testing.T) {
	for _, k := range Kinds() {
		if _, err := ParseKind(string(k)); err != nil {
			t.Errorf("%s: %v", k, err)
		}
		if k.Model() == "" {
			t.Errorf("%s has no model", k)
		}
	}
	if _, err := ParseKind("mutexx"); err == nil || !strings.Contains(err.Error(), "mutex, semaphore, rwlock, reentrant, counter") {
		t.Errorf("unknown kind: %v", err)
	}
	if got := (Config{Kind: Semaphore}).Defaults().Permits; got != 2 {
		t.Errorf("semaphore's default permits: %d, want 2 (as the CLI always had)", got)
	}
}

// TestFitIn: a cycle's acquire timeout and hold are cut to what is left of the
// workload, never lengthened; the timeout never below a millisecond (0 would ask for
// no wait at all, or none at all), the hold to none once the workload is over.
func TestFitIn(t *testing.T) {
	for _, tc := range []struct{ left, hold, timeout time.Duration }{
		{10 * time.Second, 5 * time.Second, 6 * time.Second},
		{time.Second, time.Second, time.Second},
		{1500 * time.Microsecond, 1500 * time.Microsecond, time.Millisecond},
		{0, 0, time.Millisecond},
		{-time.Second, 0, time.Millisecond},
	} {
		c := Config{Kind: Mutex, HoldMin: 5 * time.Second, HoldMax: 5 * time.Second, AcquireTimeout: 6 * time.Second}.Defaults().NewCycle(rand.New(rand.NewPCG(1, 2)), 0)
		c.FitIn(tc.left)
		if step, _ := c.Next(); time.Duration(step.Request.TimeoutMS)*time.Millisecond != tc.timeout {
			t.Errorf("%s left: acquire %+v, want a timeout of %s", tc.left, step.Request, tc.timeout)
		}
		c.Done(Message{Type: ReplyOK})
		if step, _ := c.Next(); !step.IsHold() || step.Hold != tc.hold {
			t.Errorf("%s left: step %+v, want a hold of %s", tc.left, step, tc.hold)
		}
	}
}
