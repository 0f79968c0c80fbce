package herd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The standalone capture (testdata/capture.py against Debian's ZooKeeper 3.8.0):
// session ...0001 watches the children of /zlc/run1/l0, ...0002 has an exists watch on
// the node before it, ...0003 a getData watch on another node and an exists watch on
// /zlc/run1/l0 itself; session ...0000 watches the children of /zlc/other/l0.
func TestParseRecordedStandalone(t *testing.T) {
	watches, err := ParseWchc(read(t, "wchc-standalone.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// 3.8 lists the data watches only: no child watch, so neither ...0001 nor ...0000.
	var got []string
	for _, w := range watches {
		got = append(got, w.Session+" "+w.Path)
	}
	want := "0x100016d6aed0002 /zlc/run1/l0/_c_x-lock-0000000001," +
		"0x100016d6aed0003 /zlc/run1/l0,0x100016d6aed0003 /zlc/run1/l0/_c_x-lock-0000000002"
	if strings.Join(got, ",") != want {
		t.Errorf("ParseWchc = %s, want %s", strings.Join(got, ","), want)
	}
	m := ParseMntr(read(t, "mntr-standalone.txt"))
	if m[WatchCount] != 5 || m[PacketsReceived] != 32 || m[ZLCReads] != 6 {
		t.Errorf("mntr: %s %d, %s %d, %s %d; want 5, 32, 6", WatchCount, m[WatchCount], PacketsReceived, m[PacketsReceived], ZLCReads, m[ZLCReads])
	}
	srv := NewServer(1, watches, m, m)
	if srv.ChildWatches != 2 { // the two getChildren watches, one of them elsewhere
		t.Errorf("ChildWatches = %d, want 2", srv.ChildWatches)
	}
	s := NewSample(0, "/zlc/run1/l0", watches, []Server{srv}, 0)
	c := Classify(s)
	// Two child watches (on the lock node, as Classify assumes) and two sessions with
	// data watches under it, one of them on one sibling.
	if c != (Classified{Known: true, Waiters: 4, OnLock: 2, OnOneSibling: 1, Watches: 5}) {
		t.Errorf("Classify = %+v", c)
	}
}

func TestParseWchcRejectsGarbage(t *testing.T) {
	if _, err := ParseWchc("0x1\n\t/a\nnot a watch\n"); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("ParseWchc(garbage) = %v, want an error naming line 3", err)
	}
}

func TestNewServerUnknownWhenTheCountMovedMuch(t *testing.T) {
	for _, tc := range []struct {
		before, after int64
		want          int
	}{{3, 3, 3}, {3, 4, 3}, {3, 5, -1}, {50, 55, 50}, {50, 57, -1}} {
		if s := NewServer(1, nil, map[string]int64{WatchCount: tc.before}, map[string]int64{WatchCount: tc.after}); s.ChildWatches != tc.want {
			t.Errorf("watch count %d then %d: ChildWatches = %d, want %d", tc.before, tc.after, s.ChildWatches, tc.want)
		}
	}
}

// sample is a sample of lock /l with the given data watches and child watches on one
// server whose counters stand at n.
func sample(t int64, data map[string][]string, child int, n int64) Sample {
	return Sample{T: t, Lock: "/l", DataWatches: data, Servers: []Server{{ID: 1, ChildWatches: child, Packets: 10 * n, Reads: n}}}
}

func TestAnalyze(t *testing.T) {
	grants := []int64{5, 15, 25, 35}
	pred := map[string][]string{"0x1": {"/l/a"}, "0x2": {"/l/b"}, "0x3": {"/l/c"}}
	for _, tc := range []struct {
		name    string
		samples []Sample
		verdict Verdict
		line    string
	}{
		{"predecessor", []Sample{sample(0, pred, 0, 0), sample(10, pred, 0, 4), sample(20, pred, 0, 8), sample(30, pred, 0, 12)},
			NoHerd, "no herd: each waiter watches its predecessor"},
		{"herd", []Sample{sample(0, nil, 3, 0), sample(10, nil, 4, 4), sample(20, nil, 4, 8), sample(30, nil, 1, 12)},
			Herd, "herd: 4 of 4 waiters watch /l"},
		{"one noisy sample", []Sample{sample(0, pred, 0, 0), sample(10, pred, 2, 4), sample(20, pred, 0, 8), sample(30, pred, 0, 12)},
			NoHerd, "no herd: each waiter watches its predecessor"},
		{"nobody waited", []Sample{sample(0, nil, 0, 0), sample(10, map[string][]string{"0x1": {"/l/a"}}, 0, 4)},
			NotExercised, "herd: not exercised (never two waiters at once)"},
		{"no sample", nil, NotExercised, "herd: not exercised (no usable sample of the servers' watches)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(tc.samples, grants)
			if r.Verdict != tc.verdict || r.Line != tc.line {
				t.Errorf("Analyze = %q (%s), want %q (%s)\n%s", r.Line, r.Verdict, tc.line, tc.verdict, r.Figures())
			}
		})
	}
	r := Analyze([]Sample{sample(0, pred, 0, 0), sample(10, pred, 0, 4), sample(20, pred, 0, 8), sample(30, pred, 0, 12)}, grants)
	if r.Grants != 3 || r.Reads != 12 || r.ReadsPerGrant != 4 || r.RequestsPerGrant != 40 || r.WatchesPerWaiter != 1 {
		t.Errorf("figures: %+v", r)
	}
}

func TestGrowthCountsARestartedServer(t *testing.T) {
	s := func(p int64) Sample { return Sample{Servers: []Server{{ID: 1, Packets: p}}} }
	if req, _ := growth([]Sample{s(100), s(150), s(20), s(30)}); req != 50+20+10 {
		t.Errorf("growth = %d, want 80", req)
	}
}

func TestReadSamples(t *testing.T) {
	_, err := ReadSamples(strings.NewReader("{\"t_ns\":1,\"lock\":\"/l\"}\n{\"t_ns\":2,\"lock\":\"/l\",\"bogus\":1}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("ReadSamples = %v, want an error naming line 2 and the field", err)
	}
}

// Samples recorded by the harness on a 3-server ensemble (8 workers, 12 s, no faults).
func TestAnalyzeRecordedRuns(t *testing.T) {
	for file, want := range map[string]Verdict{"mutant-herd.jsonl": Herd, "zlc-mutex.jsonl": NoHerd} {
		f, err := os.Open(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		samples, err := ReadSamples(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if r := Analyze(samples, nil); r.Verdict != want {
			t.Errorf("%s: %s, want %s\n%s", file, r.Line, want, r.Figures())
		}
	}
}

// TestContendedNeedsAKnownSampleWithTwoWaiters: only a sample whose child watches
// were known and that saw two waiters or more counts toward a verdict.
func TestContendedNeedsAKnownSampleWithTwoWaiters(t *testing.T) {
	for _, tc := range []struct {
		c    Classified
		want bool
	}{
		{Classified{Known: true, Waiters: 2}, true},
		{Classified{Known: true, Waiters: 1}, false},
		{Classified{Known: false, Waiters: 5}, false},
	} {
		if got := tc.c.Contended(); got != tc.want {
			t.Errorf("%+v.Contended() = %v, want %v", tc.c, got, tc.want)
		}
	}
}
