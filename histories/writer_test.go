package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestWriterRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	var written History
	for i, op := range genHistory(3000, 11) {
		op.Index = 1000 // ignored
		got, err := w.Append(op)
		if err != nil {
			t.Fatal(err)
		}
		if got.Index != int64(i) {
			t.Fatalf("append %d got index %d", i, got.Index)
		}
		written = append(written, got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, warnings, err := Load(path)
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	if d := diffHistories(written, h, false); d != "" {
		t.Fatal(d)
	}
}

func TestWriterClosed(t *testing.T) {
	w, err := NewWriter(filepath.Join(t.TempDir(), "h.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(Op{Type: Invoke, F: "a"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := w.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewWriterBadPath(t *testing.T) {
	if _, err := NewWriter(filepath.Join(t.TempDir(), "no", "such", "dir", "h.jsonl")); err == nil {
		t.Error("NewWriter in a missing directory succeeded")
	}
}

func TestWriterRejectsInvalidOps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	inv := Op{Type: Invoke, F: FAcquire, Process: Client(1), Time: 1}
	if _, err := w.Append(inv); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		op    Op
		field string
	}{
		{Op{Type: "okk", F: "a", Process: Client(2)}, "type"},
		{Op{Type: Invoke, Process: Client(2)}, "f"},
		{Op{Type: Invoke, F: "a", Process: Client(2), Time: -1}, "time"},
		{Op{Type: Invoke, F: "a", Process: Client(2), Value: json.RawMessage("{")}, "value"},
		{inv, "process"},
		{Op{Type: OK, F: "a", Process: Client(2)}, "process"},
		{Op{Type: OK, F: FRelease, Process: Client(1)}, "f"},
	}
	for _, b := range bad {
		_, err := w.Append(b.op)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != b.field || ve.Pos != 1 {
			t.Errorf("Append(%+v): %v, want a *ValidationError at op 1 for field %q", b.op, err, b.field)
		}
	}
	// The process's invoke is still open and the index was not used.
	got, err := w.Append(Op{Type: Info, F: FAcquire, Process: Client(1), Time: 2, Value: json.RawMessage(" [ 1, \"a b\", {\"<\": null} ] ")})
	if err != nil || got.Index != 1 {
		t.Fatalf("Append: index %d, %v", got.Index, err)
	}
	if _, err := w.Append(inv); err == nil {
		t.Error("Append reused a process after info")
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"index":0,"type":"invoke","f":"acquire","process":1,"time":1}` + "\n" +
		`{"index":1,"type":"info","f":"acquire","process":1,"time":2,"value":[1,"a b",{"\u003c":null}]}` + "\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
}

func TestWriterConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 16, 300
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			p := Client(g)
			for r := range rounds {
				for _, typ := range []Type{Invoke, OK} {
					if _, err := w.Append(Op{Type: typ, F: FAcquire, Process: p, Time: int64(r), Key: "l0"}); err != nil {
						t.Error(err)
						return
					}
				}
				if r%50 == 0 {
					if err := w.Sync(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Add(1)
	go func() { // the nemesis
		defer wg.Done()
		for range rounds {
			if _, err := w.Append(Op{Type: Info, F: "start", Process: NemesisProcess, Value: json.RawMessage(`{"a":1}`)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != (2*workers+1)*rounds {
		t.Fatalf("%d ops, want %d", len(h), (2*workers+1)*rounds)
	}
	for i, op := range h {
		if op.Index != int64(i) {
			t.Fatalf("op %d has index %d", i, op.Index)
		}
	}
}

// TestWriterSyncsInBackground checks that an op appended and then left alone reaches
// the file within about a second, with no Sync or Close.
func TestWriterSyncsInBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(Op{Type: Invoke, F: FAcquire, Process: Client(1), Time: 1}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasSuffix(data, []byte("}\n")) {
			break
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Fatalf("op not in the file after %v", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// genValidHistory generates a valid history with random strings and values, as a
// harness might append it (Index is left 0).
func genValidHistory(t *rapid.T) History {
	n := rapid.IntRange(0, 60).Draw(t, "ops")
	procs := rapid.IntRange(1, 4).Draw(t, "procs")
	ids := make([]int, procs)
	openF := make([]string, procs)
	openKey := make([]string, procs)
	for i := range ids {
		ids[i] = rapid.IntRange(-5, 1<<40).Draw(t, "id")*procs + i // distinct
	}
	var h History
	for range n {
		op := Op{Time: rapid.Int64Range(0, 1<<62).Draw(t, "time"), Lost: rapid.Bool().Draw(t, "lost")}
		if rapid.Bool().Draw(t, "hasKey") {
			op.Key = genString(t, "key")
		}
		if rapid.Bool().Draw(t, "hasMode") {
			op.Mode = genString(t, "mode")
		}
		if rapid.Bool().Draw(t, "hasError") {
			op.Error = genString(t, "error")
		}
		if rapid.Bool().Draw(t, "hasValue") {
			op.Value = json.RawMessage(genJSONValue(t, 0))
		}
		s := rapid.IntRange(-1, procs-1).Draw(t, "slot")
		switch {
		case s < 0:
			op.Process = NemesisProcess
			op.Type = rapid.SampledFrom([]Type{Invoke, OK, Fail, Info}).Draw(t, "type")
			op.F = nonEmpty(genString(t, "f"))
		case openF[s] == "":
			op.Process = Client(ids[s])
			op.Type = Invoke
			op.F = nonEmpty(genString(t, "f"))
			openF[s], openKey[s] = op.F, op.Key
		default:
			op.Process = Client(ids[s])
			op.Type = rapid.SampledFrom([]Type{OK, Fail, Info}).Draw(t, "type")
			op.F, op.Key = openF[s], openKey[s]
			openF[s] = ""
			if op.Type == Info {
				ids[s] += procs << 41 // a fresh process
			}
		}
		h = append(h, op)
	}
	return h
}

func nonEmpty(s string) string {
	if s == "" {
		return "f"
	}
	return s
}

// validUTF8Op replaces invalid UTF-8 in op's strings, as reading a file does.
func validUTF8Op(op Op) Op {
	op.Type = Type(validUTF8(string(op.Type)))
	op.F, op.Key, op.Mode, op.Error = validUTF8(op.F), validUTF8(op.Key), validUTF8(op.Mode), validUTF8(op.Error)
	return op
}

func TestWriterReadProperty(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		h := genValidHistory(rt)
		if err := Validate(h); err != nil {
			rt.Fatal(err)
		}
		path := filepath.Join(dir, "h.jsonl")
		w, err := NewWriter(path)
		if err != nil {
			rt.Fatal(err)
		}
		var want History
		for _, op := range h {
			got, err := w.Append(op)
			if err != nil {
				rt.Fatal(err)
			}
			want = append(want, validUTF8Op(got))
		}
		if err := w.Close(); err != nil {
			rt.Fatal(err)
		}
		got, warnings, err := Load(path)
		if err != nil || len(warnings) != 0 {
			rt.Fatal(err, warnings)
		}
		if d := diffHistories(want, got, false); d != "" {
			rt.Fatal(d)
		}
		// And the EDN round trip keeps it.
		var edn bytes.Buffer
		if err := WriteEDN(&edn, got); err != nil {
			rt.Fatal(err)
		}
		back, err := ReadEDN(&edn, "h.edn")
		if err != nil {
			rt.Fatalf("%v\n%s", err, edn.String())
		}
		if d := diffHistories(got, back, true); d != "" {
			rt.Fatalf("EDN round trip: %s\n%s", d, edn.String())
		}
		if strings.Contains(edn.String(), "\n\n") {
			rt.Fatal("blank line in EDN")
		}
	})
}

// TestKilledWriter SIGKILLs a process appending as fast as it can and checks that the
// file it leaves loads.
func TestKilledWriter(t *testing.T) {
	if path := os.Getenv("HISTORIES_KILLED_WRITER"); path != "" {
		killedWriterChild(path)
		return
	}
	if testing.Short() {
		t.Skip("slow")
	}
	path := filepath.Join(t.TempDir(), "h.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriter$")
	cmd.Env = append(os.Environ(), "HISTORIES_KILLED_WRITER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make([]byte, 6)
	if _, err := io.ReadFull(out, ready); err != nil || string(ready) != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("child: %q, %v", ready, err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	h, warnings, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 1 || len(h) < 1000 {
		t.Fatalf("%d ops, warnings %q", len(h), warnings)
	}
	for i, op := range h {
		if op.Index != int64(i) {
			t.Fatalf("op %d has index %d", i, op.Index)
		}
	}
	t.Logf("%d ops, warnings %q", len(h), warnings)
}

func killedWriterChild(path string) {
	w, err := NewWriter(path)
	if err != nil {
		panic(err)
	}
	for k := 0; ; k++ {
		op := Op{Type: Invoke, F: FAcquire, Process: Client(k / 2 % 8), Time: int64(k), Key: "l0", Value: json.RawMessage("null")}
		if k%2 == 1 {
			op.Type, op.Value = OK, json.RawMessage(`{"token":`+strconv.Itoa(k)+`,"note":"`+strings.Repeat("x", k%200)+`"}`)
		}
		if _, err := w.Append(op); err != nil {
			panic(err)
		}
		if k == 1000 {
			if err := w.Sync(); err != nil {
				panic(err)
			}
			os.Stdout.WriteString("ready\n")
		}
	}
}
