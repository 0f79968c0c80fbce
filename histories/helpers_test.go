package histories

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// genHistory generates a valid lock history of n ops: procs concurrent client
// processes acquiring and releasing a few keys, fencing tokens as values, failures,
// info completions (after which the process is replaced by a new one) and nemesis
// ops with object values.
func genHistory(n int, seed uint64) History {
	const procs = 10
	rng := rand.New(rand.NewPCG(seed, 42))
	h := make(History, 0, n)
	slots := make([]int, procs) // the process in each slot
	open := make([]*Op, procs)  // its open invoke, if any
	for i := range slots {
		slots[i] = i
	}
	nextProc := procs
	var t, token int64
	add := func(op Op) {
		op.Index = int64(len(h))
		t += 1 + rng.Int64N(200_000)
		op.Time = t
		h = append(h, op)
	}
	for len(h) < n {
		if rng.IntN(100) == 0 {
			f := "start"
			if rng.IntN(2) == 0 {
				f = "stop"
			}
			v := fmt.Sprintf(`{"partition":[["n%d","n%d"],["n%d"]],"note":"isolating \"n%d\""}`, rng.IntN(5), rng.IntN(5), rng.IntN(5), rng.IntN(5))
			add(Op{Type: Info, F: f, Process: NemesisProcess, Value: json.RawMessage(v)})
			continue
		}
		s := rng.IntN(procs)
		p := Client(slots[s])
		if open[s] == nil {
			f := FAcquire
			if rng.IntN(2) == 0 {
				f = FRelease
			}
			add(Op{Type: Invoke, F: f, Process: p, Key: fmt.Sprintf("l%d", rng.IntN(3)), Value: json.RawMessage("null")})
			open[s] = &h[len(h)-1]
			continue
		}
		inv := *open[s]
		open[s] = nil
		op := Op{F: inv.F, Process: p, Key: inv.Key}
		switch r := rng.IntN(20); {
		case r < 14:
			op.Type = OK
			if inv.F == FAcquire {
				token++
				op.Value = json.RawMessage(fmt.Sprint(token))
			} else {
				op.Value = json.RawMessage("null")
				op.Lost = rng.IntN(10) == 0
			}
		case r < 19:
			op.Type = Fail
			op.Error = "not-held"
			if inv.F == FAcquire {
				op.Error = "timeout"
			}
		default:
			op.Type = Info
			op.Error = "connection lost: session expired"
			slots[s] = nextProc
			nextProc++
		}
		add(op)
	}
	return h
}

// encodeJSONL renders h as a history file.
func encodeJSONL(t testing.TB, h History) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeFile writes data to a file in a temporary directory and returns its path.
func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// compactJSON returns v compacted as the writer writes it, or v if it is not JSON.
func compactJSON(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	out, err := appendCompactJSON(nil, v)
	if err != nil {
		return v
	}
	return out
}

// sameJSON reports whether a and b are equal JSON values (or both absent).
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	decode := func(v []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var x any
		err := d.Decode(&x)
		return x, err
	}
	x, errx := decode(a)
	y, erry := decode(b)
	if errx != nil || erry != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// diffHistories describes the first difference between want and got, or returns "".
// Values are compared as compacted JSON, or as JSON values if semantic is set.
func diffHistories(want, got History, semantic bool) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d ops, want %d", len(got), len(want))
	}
	for i := range want {
		a, b := want[i], got[i]
		va, vb := a.Value, b.Value
		a.Value, b.Value = nil, nil
		sameValue := bytes.Equal(compactJSON(va), compactJSON(vb))
		if semantic {
			sameValue = sameJSON(va, vb)
		}
		if !reflect.DeepEqual(a, b) || !sameValue {
			return fmt.Sprintf("op %d:\n got %+v value %s\nwant %+v value %s", i, b, vb, a, va)
		}
	}
	return ""
}

// wantParseError checks that err is a *ParseError at line with field, mentioning
// each of the fragments in its message.
func wantParseError(t *testing.T, err error, file string, line int, field string, fragments ...string) {
	t.Helper()
	pe, ok := err.(*ParseError)
	if !ok {
		t.Fatalf("error %v (%T), want a *ParseError", err, err)
	}
	if pe.File != file || pe.Line != line || pe.Field != field {
		t.Errorf("error %q at %s:%d field %q, want %s:%d field %q", err, pe.File, pe.Line, pe.Field, file, line, field)
	}
	msg := err.Error()
	prefix := fmt.Sprintf("%s:%d: ", file, line)
	if field != "" {
		if strings.HasPrefix(field, ":") {
			prefix += "field " + field + ": "
		} else {
			prefix += fmt.Sprintf("field %q: ", field)
		}
	}
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("error %q does not start with %q", msg, prefix)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not mention %q", msg, f)
		}
	}
}
