package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

func addFileSeeds(f *testing.F, paths ...string) {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzRead checks that Read never panics, fails only with a *ParseError, accepts
// only valid histories that encoding/json decodes to the same ops, and that what it
// accepts survives writing and reading back, as JSON Lines and as EDN.
func FuzzRead(f *testing.F) {
	addFileSeeds(f, "testdata/sample.jsonl", "testdata/truncated.jsonl")
	f.Add(encodeJSONL(f, genHistory(30, 9)))
	f.Add([]byte(`{"type":"invoke","f":"a\u00e9\ud800","process":1,"time":2,"value":{"a":[1,2.5e3,"<&>"]},"x":[{}]}` + "\n" +
		`{"TYPE":"ok","F":"a\u00e9\ud800","proceſs":1,"time":3,"value":null,"lost":true,"error":"e"}`))
	f.Add([]byte("{\"type\":\"info\",\"f\":\"x\",\"process\":\"nemesis\",\"time\":1}\r\n\n{\"type\":\"ok\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, warnings, err := Read(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		if len(warnings) > 1 {
			t.Fatalf("warnings %q", warnings)
		}
		if err := Validate(h); err != nil {
			t.Fatalf("accepted an invalid history: %v", err)
		}
		// encoding/json agrees on every accepted line (but for a missing index).
		var lines [][]byte
		for _, line := range bytes.Split(data, []byte("\n")) {
			if skipJSONSpace(line, 0) < len(line) {
				lines = append(lines, line)
			}
		}
		if len(lines) != len(h)+len(warnings) {
			t.Fatalf("%d ops and %d warnings from %d lines", len(h), len(warnings), len(lines))
		}
		for i, op := range h {
			var want Op
			if err := json.Unmarshal(lines[i], &want); err != nil {
				t.Fatalf("accepted %q, which encoding/json rejects: %v", lines[i], err)
			}
			want.Index = op.Index
			if !reflect.DeepEqual(op, want) {
				t.Fatalf("line %q:\n got %+v\nwant %+v", lines[i], op, want)
			}
		}
		checkRoundTrips(t, h, false)
	})
}

// FuzzReadEDN checks that ReadEDN never panics, fails only with a *ParseError,
// accepts only valid histories, and that what it accepts survives writing and reading
// back, as EDN and as JSON Lines.
func FuzzReadEDN(f *testing.F) {
	addFileSeeds(f, "testdata/sample.edn", "testdata/rt.edn")
	if data, err := os.ReadFile(knossosEtcd); err == nil {
		f.Add(data[:4096])
	}
	f.Add([]byte(`({:type :invoke :f "a b" :process 1 :time 2 :value #{1 (2) [3] {:x ##NaN}} :error \a}` + "\n" +
		`#jepsen.history.Op{:type :ok, :f "a b", :process 1, :time 1 :value "\u00e9\ud800" :key :k :mode 1/2 :lost true})`))
	f.Add([]byte("[#_1 {:type :info :f :start :process :nemesis :time 0 :value [1N 2.5M -0 +3 1e5]}] ; end"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadEDN(bytes.NewReader(data), "fuzz.edn")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		if err := Validate(h); err != nil {
			t.Fatalf("accepted an invalid history: %v", err)
		}
		for i, op := range h {
			if len(op.Value) != 0 && !bytes.Equal(compactJSON(op.Value), op.Value) {
				t.Fatalf("op %d: value %s is not compact JSON", i, op.Value)
			}
		}
		checkRoundTrips(t, h, true)
	})
}

// checkRoundTrips checks that h reads back equal from JSON Lines and from EDN (with
// Values equal as compacted JSON, or exactly if exact is set).
func checkRoundTrips(t *testing.T, h History, exact bool) {
	t.Helper()
	jsonl := encodeJSONL(t, h)
	back, warnings, err := Read(bytes.NewReader(jsonl), "rt.jsonl")
	if err != nil || len(warnings) != 0 {
		t.Fatalf("reading back %q: %v %q", jsonl, err, warnings)
	}
	if d := diffHistories(h, back, false); d != "" {
		t.Fatalf("JSON Lines round trip: %s", d)
	}
	var edn bytes.Buffer
	if err := WriteEDN(&edn, h); err != nil {
		t.Fatal(err)
	}
	fromEDN, err := ReadEDN(bytes.NewReader(edn.Bytes()), "rt.edn")
	if err != nil {
		t.Fatalf("reading back %q: %v", edn.Bytes(), err)
	}
	if d := diffHistories(h, fromEDN, true); d != "" {
		t.Fatalf("EDN round trip: %s\n%s", d, edn.Bytes())
	}
	if exact {
		for i := range h {
			if !bytes.Equal(h[i].Value, fromEDN[i].Value) || !bytes.Equal(h[i].Value, back[i].Value) {
				t.Fatalf("op %d: value %s came back as %s and %s", i, h[i].Value, back[i].Value, fromEDN[i].Value)
			}
		}
	}
}

// trickleReader hands out its data a few bytes at a time and claims to hold one
// byte, so that Read sizes its buffer at the minimum (4 KiB): lines longer than that
// take the long-line path, and every line may straddle two reads.
type trickleReader struct{ r *bytes.Reader }

func (t *trickleReader) Len() int { return 1 }

func (t *trickleReader) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	return t.r.Read(p)
}

// FuzzReadStream checks that Read gives the same history, warnings and error
// whether its input comes whole or a few bytes at a time into a small buffer.
func FuzzReadStream(f *testing.F) {
	addFileSeeds(f, "testdata/sample.jsonl", "testdata/truncated.jsonl")
	long := `{"type":"invoke","f":"acquire","process":1,"time":1,"value":"` + strings.Repeat("x", 5000) + `"}`
	f.Add([]byte(long + "\n" + `{"type":"ok","f":"acquire","process":1,"time":2}` + "\n"))
	f.Add([]byte(long[:4500]))
	f.Add([]byte(long + "\n" + strings.Repeat(" ", 4100) + "\n{\"type\":"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantWarn, wantErr := Read(bytes.NewReader(data), "fuzz.jsonl")
		got, gotWarn, gotErr := Read(&trickleReader{bytes.NewReader(data)}, "fuzz.jsonl")
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("streamed: error %v, whole: %v", gotErr, wantErr)
		}
		if !reflect.DeepEqual(gotWarn, wantWarn) {
			t.Fatalf("streamed: warnings %q, whole: %q", gotWarn, wantWarn)
		}
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("streamed: %d ops, whole: %d ops, or they differ", len(got), len(want))
		}
	})
}
