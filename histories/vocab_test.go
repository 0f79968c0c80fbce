package histories

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRecordsWriteTodaysBytes checks that each record marshals to the bytes the
// harness wrote before the records existed (hand-built maps), so old and new history
// files agree to the byte.
func TestRecordsWriteTodaysBytes(t *testing.T) {
	mustJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	grudge := map[string][]string{"s1": {"s3"}, "s3": {"s1"}}
	cases := []struct {
		name string
		r    Record
		f    F
		want string // what the old code wrote
	}{
		{"stall", Stall{SinceGrant: 12 * time.Second, StallAfter: 10 * time.Second}, FStall,
			mustJSON(map[string]any{"since_grant_ns": 12 * time.Second, "stall_after_ns": 10 * time.Second})},
		{"counter-final", CounterFinal{Value: 41}, FCounterFinal, mustJSON(map[string]int64{"value": 41})},
		{"orphan idle", Orphan{Node: "lock-0000000003", Owner: "0x1", Process: 2}, FOrphan,
			`{"node":"lock-0000000003","ephemeral_owner":"0x1","process":2}`},
		{"orphan waiting", Orphan{Node: "n1", Owner: "0x1", Process: 2, Newer: "n5"}, FOrphan,
			`{"node":"n1","ephemeral_owner":"0x1","process":2,"newer":"n5"}`},
		{"fault start", Fault{Phase: FStart, Class: "partition", Detail: map[string]any{"shape": "isolate-leader", "leader": "s3", "grudge": grudge}}, FStart,
			mustJSON(map[string]any{"fault": "partition", "shape": "isolate-leader", "leader": "s3", "grudge": grudge})},
		{"fault stop with error", Fault{Phase: FStop, Class: "pause", Detail: map[string]any{"servers": []string{"s1"}, "pids": map[string]int{"s1": 42}}, Error: "undo: <no such process>"}, FStop,
			mustJSON(map[string]any{"fault": "pause", "servers": []string{"s1"}, "pids": map[string]int{"s1": 42}, "error": "undo: <no such process>"})},
		{"fault whose detail names the fault", Fault{Phase: FStart, Class: "kill", Detail: map[string]any{"fault": "other", "error": "old"}}, FStart,
			`{"error":"old","fault":"other"}`},
		{"fault whose detail is not JSON", Fault{Phase: FStart, Class: "kill", Detail: map[string]any{"c": make(chan int)}}, FStart,
			`{"error":"json: unsupported type: chan int","fault":"kill"}`},
		{"liveness", Liveness{OK: false, Bound: 5 * time.Second,
			Finals:   []FinalCycle{{Slot: 1, Process: 0, Reply: "ok", WaitedMS: 12}, {Slot: 2, Process: 4, Reply: FinalCrashed, Error: "worker died", WaitedMS: 3}},
			Children: []LockChild{{Node: "n1", EphemeralOwner: "0x0", Process: -1, Orphan: true, Note: "persistent"}}, Proof: "p"}, FLiveness,
			`{"ok":false,"bound_ns":5000000000,"finals":[{"slot":1,"process":0,"reply":"ok","waited_ms":12},{"slot":2,"process":4,"reply":"crashed","error":"worker died","waited_ms":3}],"children":[{"node":"n1","ephemeral_owner":"0x0","process":-1,"session_alive":false,"orphan":true,"note":"persistent"}],"proof":"p"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := NemesisOp(tc.r, "why")
			if op.F != tc.f || op.Type != Info || op.Process != NemesisProcess || op.Error != "why" {
				t.Errorf("op %+v", op)
			}
			if string(op.Value) != tc.want {
				t.Errorf("value\n got %s\nwant %s", op.Value, tc.want)
			}
		})
	}
}

// TestRecordsReadTestdata reads the value of every nemesis op of the histories in the
// repository's testdata through its record and writes it again: the harness's own
// files must come back byte for byte, hand-made ones (report's fixtures) as the same
// JSON.
func TestRecordsReadTestdata(t *testing.T) {
	files, _ := filepath.Glob("../testdata/histories/*.jsonl")
	fixtures, _ := filepath.Glob("../report/testdata/*.jsonl")
	if len(files) == 0 || len(fixtures) == 0 {
		t.Fatal("no histories under ../testdata/histories or ../report/testdata")
	}
	seen := map[F]int{}
	for _, path := range append(files, fixtures...) {
		h, _, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		byteExact := !strings.Contains(path, "report")
		for _, op := range h {
			if !op.Process.Nemesis {
				continue
			}
			var r Record
			switch op.F {
			case FStart, FStop:
				r = &Fault{Phase: op.F}
			case FStall:
				r = &Stall{}
			case FOrphan:
				r = &Orphan{}
			case FLiveness:
				r = &Liveness{}
			case FCounterFinal:
				r = &CounterFinal{}
			case FOverlap:
				r = &Overlap{}
			case FRenewed:
				r = &Renewal{}
			default:
				t.Errorf("%s: op %d: nemesis op %q has no record", path, op.Index, op.F)
				continue
			}
			if err := json.Unmarshal(op.Value, r); err != nil {
				t.Fatalf("%s: op %d: %v", path, op.Index, err)
			}
			again := NemesisOp(reflect.ValueOf(r).Elem().Interface().(Record), op.Error)
			if again.F != op.F {
				t.Errorf("%s: op %d: f %q became %q", path, op.Index, op.F, again.F)
			}
			seen[op.F]++
			if byteExact {
				if string(again.Value) != string(op.Value) {
					t.Errorf("%s: op %d:\n read %s\nwrote %s", path, op.Index, op.Value, again.Value)
				}
				continue
			}
			var a, b any
			_ = json.Unmarshal(op.Value, &a)
			_ = json.Unmarshal(again.Value, &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: op %d:\n read %s\nwrote %s", path, op.Index, op.Value, again.Value)
			}
		}
	}
	for _, f := range []F{FStart, FStop, FStall, FLiveness, FCounterFinal} {
		if seen[f] == 0 {
			t.Errorf("no %s op in the testdata: the test proves nothing for it", f)
		}
	}
}

func TestFaultReadsLeniently(t *testing.T) {
	var f Fault
	err := json.Unmarshal([]byte(`{"fault":7,"shape":"ring","error":"e"}`), &f)
	if err == nil || f.Class != "" || f.Error != "e" || f.DetailString("shape") != "ring" || f.DetailString("target") != "" {
		t.Fatalf("got %+v, %v: want the error, and the fields that could be read", f, err)
	}
	if err := json.Unmarshal([]byte(`[1]`), &f); err == nil {
		t.Fatal("an array is not a fault")
	}
	if got := (FinalCycle{Reply: "ok"}).Acquired(); !got {
		t.Fatal("an ok final cycle acquired")
	}
	if got := (FinalCycle{Reply: FinalWaiting}).Acquired(); got {
		t.Fatal("a waiting final cycle did not acquire")
	}
}
