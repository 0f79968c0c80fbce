package harness

import (
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// TestBlindHolders: the overlap watch excuses a holder the nemesis paused, or whose
// session it ended, from the fault's start until a session timeout and a second after
// its stop; no other fault, and no fault that was never applied, excuses anyone.
func TestBlindHolders(t *testing.T) {
	r := &runner{cfg: Config{SessionTimeout: 2 * time.Second}}
	ev := func(phase nemesis.Phase, class nemesis.Class, p int, err string) nemesis.Event {
		return nemesis.Event{Phase: phase, Fault: class, Value: map[string]any{"process": p}, Err: err}
	}
	r.noteBlind(ev(nemesis.PhaseStart, nemesis.ClassClientPause, 3, ""))
	r.noteBlind(ev(nemesis.PhaseStart, nemesis.ClassClientPartition, 4, ""))
	r.noteBlind(ev(nemesis.PhaseStart, nemesis.ClassSessionExpire, 5, "session-expire: no holder"))
	r.noteBlind(nemesis.Event{Phase: nemesis.PhaseStart, Fault: nemesis.ClassKill, Value: map[string]any{"servers": []string{"s1"}}})
	for p, want := range map[int]bool{3: true, 4: false, 5: false, 6: false} {
		if got := r.blindNow(p); got != want {
			t.Errorf("process %d blind %v, want %v", p, got, want)
		}
	}
	r.noteBlind(ev(nemesis.PhaseStop, nemesis.ClassClientPause, 3, ""))
	if until := r.blind[3]; !r.blindNow(3) || until.After(time.Now().Add(3*time.Second+time.Millisecond)) {
		t.Errorf("after its pause: blind until %s, want about 3 s from now", time.Until(until))
	}
	r.blind[3] = time.Now().Add(-time.Millisecond)
	if r.blindNow(3) {
		t.Error("process 3 still blind once the bound has passed")
	}
}
