package histories

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// benchOps is the size of the generated history benchmarks use: 100k ops, or
// $HISTORIES_BENCH_OPS (e.g. 1000000 to time loading a million ops).
func benchOps(b *testing.B) int {
	if s := os.Getenv("HISTORIES_BENCH_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("bad HISTORIES_BENCH_OPS %q", s)
		}
		return n
	}
	return 100_000
}

var benchFile struct {
	once sync.Once
	path string
	size int64
	n    int
}

// benchHistoryFile writes a generated history of benchOps ops once per run.
func benchHistoryFile(b *testing.B) (string, int64, int) {
	benchFile.once.Do(func() {
		n := benchOps(b)
		dir, err := os.MkdirTemp("", "histories-bench")
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(dir, "history.jsonl")
		data := encodeJSONL(b, genHistory(n, 1))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		benchFile.path, benchFile.size, benchFile.n = path, int64(len(data)), n
	})
	if benchFile.path == "" {
		b.Fatal("no benchmark history")
	}
	return benchFile.path, benchFile.size, benchFile.n
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchFile.path != "" {
		os.RemoveAll(filepath.Dir(benchFile.path))
	}
	os.Exit(code)
}

// BenchmarkLoad loads a generated history; one op of the benchmark is the whole file.
func BenchmarkLoad(b *testing.B) {
	path, size, n := benchHistoryFile(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		h, _, err := Load(path)
		if err != nil || len(h) != n {
			b.Fatal(err, len(h))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/line")
}

// BenchmarkLoadEncodingJSON is the baseline BenchmarkLoad is to beat: bufio.Scanner
// and json.Unmarshal per line, without any validation.
func BenchmarkLoadEncodingJSON(b *testing.B) {
	path, size, n := benchHistoryFile(b)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		h := make(History, 0, n)
		for start := 0; start < len(data); {
			end := start
			for data[end] != '\n' {
				end++
			}
			var op Op
			if err := json.Unmarshal(data[start:end], &op); err != nil {
				b.Fatal(err)
			}
			h = append(h, op)
			start = end + 1
		}
		if len(h) != n {
			b.Fatalf("decoded %d ops, want %d", len(h), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/line")
}

// BenchmarkAppend appends the ops of a generated history, one per benchmark op,
// starting a new file whenever the history runs out.
func BenchmarkAppend(b *testing.B) {
	h := genHistory(benchOps(b), 2)
	dir := b.TempDir()
	var w *Writer
	i := len(h)
	b.ReportAllocs()
	for b.Loop() {
		if i == len(h) {
			b.StopTimer()
			if w != nil {
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if w, err = NewWriter(filepath.Join(dir, "h.jsonl")); err != nil {
				b.Fatal(err)
			}
			i = 0
			b.StartTimer()
		}
		if _, err := w.Append(h[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendParallel appends from many goroutines at once, each its own process.
func BenchmarkAppendParallel(b *testing.B) {
	w, err := NewWriter(filepath.Join(b.TempDir(), "h.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	var procs atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := Client(int(procs.Add(1)))
		value, null := json.RawMessage("17"), json.RawMessage("null")
		for k := int64(0); pb.Next(); k++ {
			op := Op{Type: Invoke, F: FAcquire, Process: p, Time: k, Key: "l0", Value: null}
			if k%2 == 1 {
				op.Type, op.Value = OK, value
			}
			if _, err := w.Append(op); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendJSON encodes one op; BenchmarkMarshalJSON is encoding/json's time.
func BenchmarkAppendJSON(b *testing.B) {
	op := Op{Index: 123456, Type: OK, F: FAcquire, Process: Client(3), Time: 1234567890, Key: "l0", Value: json.RawMessage("42")}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = op.AppendJSON(buf[:0])
	}
}

func BenchmarkMarshalJSON(b *testing.B) {
	op := Op{Index: 123456, Type: OK, F: FAcquire, Process: Client(3), Time: 1234567890, Key: "l0", Value: json.RawMessage("42")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(op); err != nil {
			b.Fatal(err)
		}
	}
}
