package harness

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
)

func TestStatusTalliesOpsFaultsAndEvents(t *testing.T) {
	nem := func(f, fault string) histories.Op {
		v, _ := json.Marshal(map[string]string{"fault": fault})
		return histories.Op{Type: histories.Info, F: f, Process: histories.NemesisProcess, Value: v}
	}
	client := func(typ histories.Type, f string) histories.Op {
		return histories.Op{Type: typ, F: f, Process: histories.Client(3), Key: "l0", Time: 2e9}
	}
	lost := client(histories.OK, histories.FRelease)
	lost.Lost = true
	var s status
	for _, op := range []histories.Op{
		nem("start", "kill"), nem("start", "client-pause"),
		client(histories.Invoke, histories.FAcquire), client(histories.OK, histories.FAcquire),
		client(histories.Fail, histories.FAcquire), nem("stop", "kill"), lost,
	} {
		s.observe(op)
	}
	if s.ok != 2 || s.fail != 1 || s.info != 0 {
		t.Errorf("ok/fail/info = %d/%d/%d, want 2/1/0", s.ok, s.fail, s.info)
	}
	if want := map[string]int{"client-pause": 1}; !reflect.DeepEqual(s.faults, want) {
		t.Errorf("faults on = %v, want %v", s.faults, want)
	}
	if !strings.Contains(s.lastEvent, "process 3 lost l0 at 2.0s") {
		t.Errorf("last event %q, want the lost lock", s.lastEvent)
	}
	s.observe(client(histories.Info, histories.FRelease))
	if s.info != 1 || !strings.Contains(s.lastEvent, "release l0 unknown") {
		t.Errorf("after an info: info %d, last event %q", s.info, s.lastEvent)
	}
}
