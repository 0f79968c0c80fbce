package workloads

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// addLines adds every line of the files in testdata/protocol as a seed.
func addLines(f *testing.F, glob string) {
	files, err := filepath.Glob(filepath.Join("testdata", "protocol", glob))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files %s: %v", glob, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(line) > 0 {
				f.Add(line)
			}
		}
	}
}

// compactToken returns m with its token in compact JSON, as json.Marshal writes it.
func compactToken(t *testing.T, m Message) Message {
	if len(m.Token) == 0 {
		return m
	}
	var b bytes.Buffer
	if err := json.Compact(&b, m.Token); err != nil {
		t.Fatalf("accepted token %q is not JSON: %v", m.Token, err)
	}
	m.Token = b.Bytes()
	return m
}

// FuzzParseMessage checks that ParseMessage never panics, accepts only a reply (an
// id and a known type) or an event (a known one), never both, and that what it
// accepts reads back the same after json.Marshal.
func FuzzParseMessage(f *testing.F) {
	addLines(f, "messages*.jsonl")
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := ParseMessage(line)
		if err != nil {
			return
		}
		switch {
		case m.Event != "" && m.ID != nil:
			t.Fatalf("%q: both a reply and an event", line)
		case m.Event != "":
			if m.Event != EventLost && m.Event != EventSession && m.Event != EventRenewed {
				t.Fatalf("%q: unknown event %q accepted", line, m.Event)
			}
		case m.ID != nil:
			if !slices.Contains([]string{ReplyOK, ReplyFail, ReplyInfo}, m.Type) {
				t.Fatalf("%q: reply type %q accepted", line, m.Type)
			}
		default:
			t.Fatalf("%q: neither a reply nor an event", line)
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%q: marshal: %v", line, err)
		}
		back, err := ParseMessage(out)
		if err != nil {
			t.Fatalf("%q marshals as %q, which does not parse: %v", line, out, err)
		}
		if !reflect.DeepEqual(compactToken(t, back), compactToken(t, m)) {
			t.Fatalf("%q: %+v read back as %+v", line, m, back)
		}
	})
}

// FuzzParseRequest checks that ParseRequest never panics, accepts only known ops (a
// write with a value), and that what it accepts reads back the same after
// json.Marshal.
func FuzzParseRequest(f *testing.F) {
	addLines(f, "requests*.jsonl")
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRequest(line)
		if err != nil {
			return
		}
		if !slices.Contains([]string{OpInit, OpAcquire, OpRelease, OpClose, OpRead, OpWrite}, r.Op) {
			t.Fatalf("%q: op %q accepted", line, r.Op)
		}
		if r.Op == OpWrite && r.Value == nil {
			t.Fatalf("%q: a write without a value accepted", line)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%q: marshal: %v", line, err)
		}
		back, err := ParseRequest(out)
		if err != nil {
			t.Fatalf("%q marshals as %q, which does not parse: %v", line, out, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("%q: %+v read back as %+v", line, r, back)
		}
	})
}

// FuzzParseKind checks that ParseKind accepts exactly the workload names.
func FuzzParseKind(f *testing.F) {
	for _, k := range Kinds() {
		f.Add(string(k))
	}
	f.Add("Mutex")
	f.Add("mutex ")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKind(s)
		if known := slices.Contains(Kinds(), Kind(s)); known != (err == nil) || (known && string(k) != s) {
			t.Fatalf("ParseKind(%q) = %q, %v", s, k, err)
		}
	})
}
