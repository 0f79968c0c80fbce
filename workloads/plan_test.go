package workloads

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseStepReports(t *testing.T) {
	m, err := ParseMessage([]byte(`{"id":2,"step":"ok","f":"acquire","mono_ns":12,"token":5}`))
	if err != nil || !m.IsReport() || *m.MonoNS != 12 || string(m.Token) != "5" {
		t.Fatalf("a report: %+v, %v", m, err)
	}
	for line, want := range map[string]string{
		`{"id":2,"step":"done","f":"acquire","mono_ns":1}`:           "field step",
		`{"id":2,"step":"ok","f":"read","mono_ns":1}`:                "field f",
		`{"id":2,"step":"ok","f":"acquire"}`:                         "field mono_ns",
		`{"id":2,"step":"ok","type":"ok","f":"acquire","mono_ns":1}`: "field type",
	} {
		if _, err := ParseMessage([]byte(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one naming %s", line, err, want)
		}
	}
	if _, err := ParseRequest([]byte(`{"id":3,"op":"cycle","hold_us":-1}`)); err == nil {
		t.Error("a cycle with a negative hold parsed")
	}
}

func TestPlanOfACycle(t *testing.T) {
	c := Config{Kind: Reentrant, HoldMin: 1500 * time.Microsecond, HoldMax: 1500 * time.Microsecond}.Defaults()
	req, ok := c.NewCycle(rand.New(rand.NewPCG(1, 1)), 0).Plan()
	if !ok || req.Op != OpCycle || req.HoldUS != 1500 || req.Depth < 1 || req.TimeoutMS != c.AcquireTimeout.Milliseconds() {
		t.Fatalf("plan %+v, %v", req, ok)
	}
	counter := Config{Kind: Counter}.Defaults()
	if _, ok := counter.NewCycle(rand.New(rand.NewPCG(1, 1)), 0).Plan(); ok {
		t.Error("a counter cycle was planned (its read and write need the harness)")
	}
	if _, ok := c.FinalCycle(time.Second).Plan(); ok {
		t.Error("the final cycle was planned")
	}
}
