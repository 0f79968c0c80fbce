package models

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

// hist builds a history from lines of the form
//
//	TIME PROCESS TYPE F [k=KEY] [m=MODE] [v=JSON] [lost]
//
// where PROCESS is an integer or "n" for the nemesis, TYPE is
// invoke|ok|fail|info, F is acquire|release|read|write|anything and JSON is
// the op's value (without blanks). Blank lines and lines starting with #
// are skipped; ops are indexed from 0.
func hist(t testing.TB, text string) histories.History {
	t.Helper()
	var h histories.History
	for ln, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Fatalf("line %d: %q: want TIME PROCESS TYPE F", ln+1, line)
		}
		tm, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("line %d: %v", ln+1, err)
		}
		op := histories.Op{Index: int64(len(h)), Time: tm, Type: histories.Type(f[2]), F: f[3]}
		if f[1] == "n" {
			op.Process = histories.NemesisProcess
		} else {
			id, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("line %d: %v", ln+1, err)
			}
			op.Process = histories.Client(id)
		}
		for _, x := range f[4:] {
			switch {
			case strings.HasPrefix(x, "k="):
				op.Key = x[2:]
			case strings.HasPrefix(x, "m="):
				op.Mode = x[2:]
			case strings.HasPrefix(x, "v="):
				op.Value = json.RawMessage(x[2:])
			case x == "lost":
				op.Lost = true
			default:
				t.Fatalf("line %d: unknown field %q", ln+1, x)
			}
		}
		h = append(h, op)
	}
	return h
}

// tb is what the helpers need of a *testing.T or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// porcupineVerdict checks every key of h with porcupine and the kind's
// owner-aware (or Knossos) model, without a time limit.
func porcupineVerdict(t tb, h histories.History, cfg Config) Verdict {
	t.Helper()
	cfg, err := cfg.normalize()
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse(h, cfg.Kind)
	if err != nil {
		t.Fatal(err)
	}
	m := newLockModel(cfg.Kind, cfg.Permits)
	v := Valid
	for k := range p.keys {
		ops := window(p, toPops(p, int32(k), cfg.Kind), math.MinInt64, math.MaxInt64, false)
		if !porcupine.CheckOperations(m.porcupineModel(initFree), ops) {
			v = Invalid
		}
	}
	return v
}

// windowIllegal reports whether porcupine finds the window of an invalid key
// not linearizable on its own, from a free lock.
func windowIllegal(t tb, kr KeyResult, cfg Config) porcupine.CheckResult {
	t.Helper()
	cfg, _ = cfg.normalize()
	h := make(histories.History, len(kr.Window))
	copy(h, kr.Window)
	p, err := parse(h, cfg.Kind)
	if err != nil {
		t.Fatalf("window does not parse: %v", err)
	}
	m := newLockModel(cfg.Kind, cfg.Permits)
	res := porcupine.Ok
	for k := range p.keys {
		ops := window(p, toPops(p, int32(k), cfg.Kind), math.MinInt64, math.MaxInt64, false)
		if r := porcupine.CheckOperationsTimeout(m.porcupineModel(initFree), ops, 10*time.Second); r != porcupine.Ok {
			res = r
		}
	}
	return res
}

func describeHistory(h histories.History) string {
	var b strings.Builder
	for _, op := range h {
		extra := ""
		if op.Key != "" {
			extra += " k=" + op.Key
		}
		if op.Mode != "" {
			extra += " m=" + op.Mode
		}
		if len(op.Value) > 0 {
			extra += " v=" + string(op.Value)
		}
		if op.Lost {
			extra += " lost"
		}
		fmt.Fprintf(&b, "%d %v %s %s%s\n", op.Time, op.Process, op.Type, op.F, extra)
	}
	return b.String()
}
