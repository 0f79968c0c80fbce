package histories

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pairHist builds a history from lines "PROCESS TYPE F [KEY]", PROCESS an integer or
// "n" for the nemesis; times and indexes are the positions.
func pairHist(t *testing.T, text string) History {
	t.Helper()
	var h History
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("bad line %q", line)
		}
		op := Op{Index: int64(len(h)), Time: int64(len(h)), Type: Type(f[1]), F: f[2], Process: NemesisProcess}
		if f[0] != "n" {
			id, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatal(err)
			}
			op.Process = Client(id)
		}
		if len(f) > 3 {
			op.Key = f[3]
		}
		h = append(h, op)
	}
	return h
}

func TestPairer(t *testing.T) {
	cases := []struct {
		name, history string
		// pairs are "invoke-completion" positions as Pairs returns them; -1 for open.
		pairs string
		// bad is the position of the first op that breaks a rule, -1 if none; rule
		// the rule, at the place PairError.At names, field the field Validate blames.
		bad   int
		rule  Rule
		at    int
		field string
	}{
		{name: "empty", history: "", bad: -1},
		{name: "one cycle", history: "1 invoke acquire\n1 ok acquire\n1 invoke release\n1 ok release",
			pairs: "0-1 2-3", bad: -1},
		{name: "interleaved processes", history: "1 invoke acquire\n2 invoke acquire\n2 fail acquire\n1 ok acquire",
			pairs: "1-2 0-3", bad: -1},
		{name: "nemesis ops are not paired", history: "n info start\n1 invoke acquire\nn info stop\n1 info acquire",
			pairs: "1-3", bad: -1},
		{name: "still open at the end", history: "3 invoke acquire\n1 invoke acquire\n1 ok acquire\n2 invoke release",
			pairs: "1-2 0--1 3--1", bad: -1},
		{name: "other key after info", history: "1 invoke write c\n1 info write c\n1 invoke release l\n1 info release l",
			pairs: "0-1 2-3", bad: -1},
		{name: "sparse process ids", history: "100000 invoke acquire\n-4 invoke acquire\n-4 ok acquire",
			pairs: "1-2 0--1", bad: -1},
		{name: "completion without invoke", history: "1 ok acquire",
			bad: 0, rule: RuleOpenInvoke, at: -1, field: "process"},
		{name: "completion after completion", history: "1 invoke acquire\n1 ok acquire\n1 fail acquire",
			pairs: "0-1", bad: 2, rule: RuleOpenInvoke, at: -1, field: "process"},
		{name: "two open ops", history: "1 invoke acquire\n1 invoke release",
			pairs: "0--1", bad: 1, rule: RuleOneOpen, at: 0, field: "process"},
		{name: "f differs", history: "1 invoke acquire\n1 ok release",
			pairs: "0--1", bad: 1, rule: RuleSameF, at: 0, field: "f"},
		{name: "key differs", history: "1 invoke acquire a\n1 ok acquire b",
			pairs: "0--1", bad: 1, rule: RuleSameKey, at: 0, field: "key"},
		{name: "empty completion key", history: "1 invoke acquire a\n1 ok acquire",
			pairs: "0--1", bad: 1, rule: RuleSameKey, at: 0, field: "key"},
		{name: "reused after info", history: "1 invoke acquire\n1 info acquire\n1 invoke acquire\n1 ok acquire",
			pairs: "0-1", bad: 2, rule: RuleDeadAfterInfo, at: 1, field: "process"},
		{name: "reused after info, sparse id", history: "-7 invoke acquire\n-7 info acquire\n-7 invoke acquire",
			pairs: "0-1", bad: 2, rule: RuleDeadAfterInfo, at: 1, field: "process"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h History
			if tc.history != "" {
				h = pairHist(t, tc.history)
			}
			var got []string
			for _, p := range Pairs(h) {
				got = append(got, strconv.Itoa(p.Invoke)+"-"+strconv.Itoa(p.Completion))
			}
			if strings.Join(got, " ") != tc.pairs {
				t.Errorf("Pairs = %q, want %q", strings.Join(got, " "), tc.pairs)
			}
			var pr Pairer
			bad := -1
			for pos := range h {
				inv, err := pr.Step(&h[pos], pos)
				if err != nil {
					bad = pos
					if err.Rule != tc.rule || err.At != tc.at || err.Field != tc.field {
						t.Errorf("op %d: %+v, want rule %d at %d field %q", pos, err, tc.rule, tc.at, tc.field)
					}
					if again := pr.Check(&h[pos], pos); again == nil || again.Rule != err.Rule {
						t.Errorf("Check after a failed Step: %v, want the same error (Step records nothing)", again)
					}
					break
				}
				if (inv >= 0) != (h[pos].Type != Invoke && !h[pos].Process.Nemesis) {
					t.Errorf("op %d: Step returned invoke %d", pos, inv)
				}
			}
			if bad != tc.bad {
				t.Fatalf("first bad op %d, want %d", bad, tc.bad)
			}
			err := Validate(h)
			if tc.bad < 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			ve, ok := err.(*ValidationError)
			if !ok || ve.Pos != tc.bad || ve.Field != tc.field {
				t.Fatalf("Validate: %v, want op %d field %q", err, tc.bad, tc.field)
			}
		})
	}
}

// TestPairerOpen checks Open across the dense and the sparse process ids.
func TestPairerOpen(t *testing.T) {
	h := pairHist(t, "70000 invoke acquire\n2 invoke acquire\n-1 invoke release\n2 ok acquire\n5 invoke read")
	var pr Pairer
	for pos := range h {
		if _, err := pr.Step(&h[pos], pos); err != nil {
			t.Fatal(err)
		}
	}
	if got := pr.Open(); !slices.Equal(got, []int{0, 2, 4}) {
		t.Fatalf("Open = %v, want [0 2 4]", got)
	}
}

// TestPairErrorUnits checks that the places in messages are named in each reader's unit.
func TestPairErrorUnits(t *testing.T) {
	_, _, err := Read(strings.NewReader(`{"type":"invoke","f":"acquire","process":1,"time":0}
{"type":"invoke","f":"release","process":1,"time":1}
`), "h.jsonl")
	if err == nil || !strings.Contains(err.Error(), `h.jsonl:2: field "process": process 1 invokes "release" while its "acquire" invoked on line 1 is still open`) {
		t.Fatalf("Read: %v", err)
	}
	err = Validate(pairHist(t, "1 invoke acquire\n1 invoke release"))
	if err == nil || !strings.Contains(err.Error(), `op 1: field "process": process 1 invokes "release" while its "acquire" invoked on op 0 is still open`) {
		t.Fatalf("Validate: %v", err)
	}
}
