package histories

import (
	"strings"
	"testing"
)

// A worker that crashed during the counter workload's write while holding the lock:
// its write completes as info on the counter's key, then its lock is released (invoke,
// info) on the lock's key. Using the process again on the counter's key is an error.
func TestInfoEndsAProcessPerKey(t *testing.T) {
	p := Client(4)
	base := History{
		{Type: Invoke, F: FAcquire, Process: p, Key: "l0", Time: 1},
		{Type: OK, F: FAcquire, Process: p, Key: "l0", Time: 2},
		{Type: Invoke, F: FWrite, Process: p, Key: "counter", Time: 3},
		{Type: Info, F: FWrite, Process: p, Key: "counter", Time: 4},
		{Type: Invoke, F: FRelease, Process: p, Key: "l0", Time: 4},
		{Type: Info, F: FRelease, Process: p, Key: "l0", Time: 4},
	}
	if err := Validate(base); err != nil {
		t.Fatalf("crash bookkeeping across keys rejected: %v", err)
	}
	again := append(History{}, base[:4]...)
	again = append(again, Op{Type: Invoke, F: FRead, Process: p, Key: "counter", Time: 5})
	if err := Validate(again); err == nil || !strings.Contains(err.Error(), "used again") {
		t.Errorf("reuse on the key of the info: got %v", err)
	}
	after := append(History{}, base...)
	after = append(after, Op{Type: Invoke, F: FAcquire, Process: p, Key: "l0", Time: 6})
	if err := Validate(after); err == nil || !strings.Contains(err.Error(), "used again") {
		t.Errorf("reuse on the lock key after its info: got %v", err)
	}
	mismatch := History{
		{Type: Invoke, F: FRead, Process: p, Key: "counter", Time: 1},
		{Type: OK, F: FRead, Process: p, Key: "l0", Time: 2},
	}
	if err := Validate(mismatch); err == nil || !strings.Contains(err.Error(), `field "key"`) {
		t.Errorf("completion on another key: got %v", err)
	}
}
