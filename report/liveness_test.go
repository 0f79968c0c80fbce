package report

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
)

func nemesisOp(f string, at int64, value, errText string) histories.Op {
	return histories.Op{Type: histories.Info, F: f, Process: histories.NemesisProcess, Time: at, Value: []byte(value), Error: errText}
}

// TestLivenessCheck reads the harness's liveness op: a pass, a failure within the
// bound, a failure shown by a blocking orphan (with the op that ended the workload
// early), and values that must be refused.
func TestLivenessCheck(t *testing.T) {
	work := histories.History{
		op(histories.Invoke, "acquire", 0, 10), op(histories.OK, "acquire", 0, 20),
		op(histories.Invoke, "release", 0, 30), op(histories.OK, "release", 0, 40),
	}
	orphanChildren := `"children":[{"node":"_c_x-lock-0000000003","ephemeral_owner":"0x1","process":2,"session_alive":true,"orphan":true,"note":"owned by live worker process 2, which does not hold the lock"}]`
	for _, tc := range []struct {
		name  string
		extra histories.History
		found bool
		want  models.Verdict
		// witness lists what the witness must say; the violation time is 9 s.
		witness []string
		// unwanted must not be in the witness.
		unwanted string
		err      string
	}{
		{name: "no final phase", found: false},
		{name: "everyone acquired", extra: histories.History{
			nemesisOp("liveness", 9e9, `{"ok":true,"bound_ns":5000000000,"finals":[{"slot":1,"process":0,"reply":"ok"}]}`, ""),
		}, found: true, want: models.Valid},
		{name: "bound ran out", extra: histories.History{
			nemesisOp("liveness", 9e9, `{"ok":false,"bound_ns":5000000000,"finals":[{"slot":1,"process":0,"reply":"fail","error":"did not acquire within the final bound","waited_ms":5000}],`+orphanChildren+`}`, ""),
		}, found: true, want: models.Invalid, witness: []string{
			"within 5.0s", "slot 1, process 0: fail after 5.0s", "ORPHAN: _c_x-lock-0000000003 owner 0x1 (worker process 2, session alive)",
		}},
		{name: "orphan shown", extra: histories.History{
			nemesisOp("orphan", 3e9, `{"node":"_c_x-lock-0000000003"}`, "the lowest lock node _c_x-lock-0000000003 belongs to ...: ending the workload for the final phase"),
			nemesisOp("liveness", 9e9, `{"ok":false,"bound_ns":5000000000,"proof":"the lowest lock node _c_x-lock-0000000003 belongs to the live session 0x1 of worker process 2","finals":[{"slot":1,"process":0,"reply":"waiting","error":"no answer when the final phase was judged"}],`+orphanChildren+`}`, ""),
		}, found: true, want: models.Invalid, witness: []string{
			"the workload was ended early at 3.0s: the lowest lock node",
			"the lock could never be granted again: the lowest lock node _c_x-lock-0000000003 belongs to the live session 0x1 of worker process 2",
			"slot 1, process 0: waiting", "ORPHAN:",
		}},
		{name: "missed wake-up", extra: histories.History{
			nemesisOp("liveness", 9e9, `{"ok":false,"bound_ns":5000000000,"finals":[{"slot":1,"process":2,"reply":"waiting","error":"no answer when the final phase was judged"}],"children":[{"node":"_c_x-lock-0000000004","ephemeral_owner":"0x1","process":2,"session_alive":true,"orphan":false,"missed_wakeup":true,"note":"the lowest node: worker process 2 waits for the lock with it and was never granted"},{"node":"_c_x-lock-0000000005","ephemeral_owner":"0x2","process":3,"session_alive":true,"note":"worker process 3 waits for the lock with it"}]}`, ""),
		}, found: true, want: models.Invalid, witness: []string{
			"a missed wake-up, not an orphan: the lowest lock node _c_x-lock-0000000004 belongs to worker process 2, which was waiting for the lock with it and was never granted",
			"MISSED WAKE-UP: _c_x-lock-0000000004 owner 0x1 (worker process 2, session alive)",
			"\n  _c_x-lock-0000000005 owner 0x2 (worker process 3, session alive): worker process 3 waits",
		}, unwanted: "ORPHAN"},
		{name: "missed wake-up seen during the workload, the final phase passing", extra: histories.History{
			nemesisOp("orphan", 9e9, `{"node":"_c_x-lock-0000000004","ephemeral_owner":"0x1","process":2,"missed_wakeup":true}`, "with no fault on for at least 4s, the lowest lock node _c_x-lock-0000000004 belongs to the live session 0x1 of worker process 2, which waits for the lock with it and was not granted: a missed wake-up"),
			nemesisOp("liveness", 12e9, `{"ok":true,"bound_ns":5000000000,"finals":[{"slot":1,"process":0,"reply":"ok"}]}`, ""),
		}, found: true, want: models.Invalid, witness: []string{
			"a missed wake-up at 9.0s: with no fault on for at least 4s, the lowest lock node _c_x-lock-0000000004",
			"the final phase then granted every worker the lock",
		}, unwanted: "could never be granted"},
		{name: "missed wake-up in the final phase, which it ended", extra: histories.History{
			nemesisOp("orphan", 9e9, `{"node":"_c_x-lock-0000000004","ephemeral_owner":"0x1","process":2,"missed_wakeup":true}`, "in the final phase, with no fault on for at least 4s, the lowest lock node _c_x-lock-0000000004 belongs to ... a missed wake-up"),
			nemesisOp("liveness", 9.5e9, `{"ok":false,"missed_wakeup":true,"bound_ns":5000000000,"finals":[{"slot":1,"process":2,"reply":"waiting","error":"no answer when the final phase was judged"}],"children":[{"node":"_c_x-lock-0000000004","ephemeral_owner":"0x1","process":2,"session_alive":true,"missed_wakeup":true}]}`, ""),
		}, found: true, want: models.Invalid, witness: []string{
			"a missed wake-up at 9.0s: in the final phase", "the final phase was ended early on it", "MISSED WAKE-UP: _c_x-lock-0000000004",
		}, unwanted: "ended early at 9.0s"},
		{name: "an orphan seen during the workload, the final phase passing", extra: histories.History{
			nemesisOp("orphan", 3e9, `{"node":"_c_x-lock-0000000003","ephemeral_owner":"0x1","process":2}`, "the lowest lock node ...: ending the workload for the final phase"),
			nemesisOp("liveness", 9e9, `{"ok":true,"bound_ns":5000000000,"finals":[{"slot":1,"process":0,"reply":"ok"}]}`, ""),
		}, found: true, want: models.Valid},
		{name: "not json", extra: histories.History{nemesisOp("liveness", 9e9, `{"ok":`, "")}, err: `field "value": liveness value`},
		{name: "wrong type", extra: histories.History{nemesisOp("liveness", 9e9, `{"ok":"yes"}`, "")}, err: `field "value": liveness value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := append(append(histories.History{}, work...), tc.extra...)
			for i := range h {
				h[i].Index = int64(i)
			}
			c, found, err := LivenessCheck(h)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.found {
				t.Fatalf("found = %v, want %v", found, tc.found)
			}
			if !found {
				return
			}
			if c.Verdict != tc.want {
				t.Fatalf("verdict %v, want %v (witness %q)", c.Verdict, tc.want, c.Witness)
			}
			if tc.want == models.Invalid && (c.FirstViolationSeconds == nil || *c.FirstViolationSeconds != 9) {
				t.Errorf("first violation %v, want 9 s", c.FirstViolationSeconds)
			}
			if tc.unwanted != "" && strings.Contains(c.Witness, tc.unwanted) {
				t.Errorf("witness says %q:\n%s", tc.unwanted, c.Witness)
			}
			for _, w := range tc.witness {
				if !strings.Contains(c.Witness, w) {
					t.Errorf("witness lacks %q:\n%s", w, c.Witness)
				}
			}
		})
	}
}
