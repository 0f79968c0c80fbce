package models

import (
	"flag"
	"os"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/zlockcheck/zlockcheck/histories"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The differential test is the proof that the holds checker is right:
	// run more cases than rapid's default 100 unless told otherwise.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set && !env {
		_ = flag.Set("rapid.checks", "1500")
	}
	os.Exit(m.Run())
}

// genLockHistory draws a small lock history: 2 to 4 workers, up to 12
// operations (14 under reentrant) with random outcomes (ok, fail, info,
// pending, lost releases), random overlapping timings with many ties between
// processes. Outcomes ignore the lock, so workers often claim ok without
// waiting and histories are often invalid. A process whose op completes as
// info or stays pending is never used again: its worker goes on as a new
// process. Under reentrant a holder acquires again almost as often as it
// releases, so holds nest, and a failed or lost release ends its whole hold.
func genLockHistory(t *rapid.T, kind Kind) histories.History {
	type slot struct {
		proc  int
		now   int64
		holds int
		fresh bool // proc has done nothing yet
	}
	type line struct {
		t  int64
		op histories.Op
	}
	workers := rapid.IntRange(2, 4).Draw(t, "workers")
	slots := make([]slot, workers)
	for i := range slots {
		slots[i] = slot{proc: i, now: int64(rapid.IntRange(0, 3).Draw(t, "start")), fresh: true}
	}
	nextProc := workers
	var lines []line
	maxOps, releaseWhenHolding := 12, 8
	if kind == Reentrant {
		maxOps, releaseWhenHolding = 14, 4
	}
	n := rapid.IntRange(1, maxOps).Draw(t, "ops")
	for range n {
		s := &slots[rapid.IntRange(0, workers-1).Draw(t, "worker")]
		f := histories.FAcquire
		if r := rapid.IntRange(0, 9).Draw(t, "f"); (s.holds > 0 && r < releaseWhenHolding) || (s.holds == 0 && r < 1) {
			f = histories.FRelease
		}
		mode := ""
		if kind == RWLock && f == histories.FAcquire {
			mode = rapid.SampledFrom([]string{histories.ModeRead, histories.ModeWrite}).Draw(t, "mode")
		}
		outcomes := []string{"ok", "ok", "fail", "info", "pending"}
		if kind == Reentrant {
			outcomes = append(outcomes, "ok") // nesting needs ok acquires
		}
		if f == histories.FRelease {
			outcomes = append(outcomes, "lost")
		}
		out := rapid.SampledFrom(outcomes).Draw(t, "outcome")
		// A process's next op starts strictly after its previous one ended:
		// porcupine sees only times, so at a tie it would not know which of
		// a process's ops came first (see TestCheck's "process order" case).
		minGap := 1
		if s.fresh {
			minGap = 0
		}
		s.fresh = false
		inv := s.now + int64(rapid.IntRange(minGap, 3).Draw(t, "gap"))
		done := inv + int64(rapid.IntRange(0, 4).Draw(t, "latency"))
		op := histories.Op{Type: histories.Invoke, F: f, Process: histories.Client(s.proc), Time: inv, Mode: mode}
		if out == "lost" {
			op.Lost, done = true, inv
		}
		lines = append(lines, line{inv, op})
		switch out {
		case "pending":
		default:
			c := op
			c.Time = done
			switch out {
			case "ok", "lost":
				c.Type = histories.OK
			case "fail":
				c.Type = histories.Fail
			case "info":
				c.Type = histories.Info
			}
			lines = append(lines, line{done, c})
		}
		s.now = done
		switch {
		case out == "info" || out == "pending":
			s.proc, s.holds, s.fresh = nextProc, 0, true
			nextProc++
		case f == histories.FAcquire && out == "ok":
			s.holds++
		case f == histories.FRelease && kind == Reentrant && (out == "fail" || out == "lost"):
			s.holds = 0
		case f == histories.FRelease && s.holds > 0:
			s.holds--
		}
	}
	// Each worker's lines are in time order already; a stable sort keeps them so.
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].t < lines[j].t })
	h := make(histories.History, len(lines))
	for i, l := range lines {
		h[i] = l.op
		h[i].Index = int64(i)
	}
	return h
}

// TestHoldsMatchesPorcupine checks the holds checker against porcupine and
// the owner-aware models on random small histories, and that the window of
// every invalid one is not linearizable either.
func TestHoldsMatchesPorcupine(t *testing.T) {
	for _, cfg := range []Config{{Kind: Mutex}, {Kind: Semaphore, Permits: 2}, {Kind: RWLock}, {Kind: Reentrant}} {
		t.Run(string(cfg.Kind), func(t *testing.T) {
			var valid, invalid, nested, innerEnd atomic.Int64
			rapid.Check(t, func(t *rapid.T) {
				h := genLockHistory(t, cfg.Kind)
				if cfg.Kind == Reentrant {
					n, e := nesting(h)
					if n {
						nested.Add(1)
					}
					if e {
						innerEnd.Add(1)
					}
				}
				res, err := Check(h, cfg)
				if err != nil {
					t.Fatalf("%v\n%s", err, describeHistory(h))
				}
				want := porcupineVerdict(t, h, cfg)
				if res.Verdict != want {
					t.Fatalf("holds checker says %s, porcupine says %s; witness %q\n%s",
						res.Verdict, want, res.Keys[0].Witness, describeHistory(h))
				}
				if res.Verdict == Valid {
					valid.Add(1)
					return
				}
				invalid.Add(1)
				kr := res.Keys[0]
				if r := windowIllegal(t, kr, cfg); r != porcupine.Illegal {
					t.Fatalf("window is %s, want Illegal; witness %q\nhistory:\n%s\nwindow:\n%s",
						r, kr.Witness, describeHistory(h), describeHistory(kr.Window))
				}
			})
			total := valid.Load() + invalid.Load()
			t.Logf("%d valid, %d invalid", valid.Load(), invalid.Load())
			if valid.Load()*10 < total || invalid.Load()*10 < total {
				t.Errorf("generator is lopsided: %d valid, %d invalid", valid.Load(), invalid.Load())
			}
			if cfg.Kind == Reentrant {
				// The generator must exercise what makes reentrant differ
				// from mutex: nesting, and holds ended by an inner release
				// that failed, was lost, crashed or never completed.
				t.Logf("%d nested, %d ended by an inner failed, lost, crashed or pending release", nested.Load(), innerEnd.Load())
				if nested.Load()*4 < total || innerEnd.Load()*20 < total {
					t.Errorf("generator nests too little: %d of %d nested, %d ended inside", nested.Load(), total, innerEnd.Load())
				}
			}
		})
	}
}

// nesting reports whether some process of h held a lock at depth 2 or more
// (counting ok acquires and ok releases), and whether some hold at depth 2
// or more was ended by a release that failed, was lost, crashed or never
// completed.
func nesting(h histories.History) (nested, innerEnd bool) {
	depth := map[int]int{}
	open := map[int]histories.Op{}
	end := func(inv histories.Op, typ histories.Type) {
		d := depth[inv.Process.ID]
		switch {
		case d == 0:
		case typ == histories.OK && !inv.Lost:
			depth[inv.Process.ID]--
		default:
			innerEnd = innerEnd || d > 1
			depth[inv.Process.ID] = 0
		}
	}
	for _, op := range h {
		id := op.Process.ID
		if op.Type == histories.Invoke {
			open[id] = op
			continue
		}
		inv := open[id]
		delete(open, id)
		switch {
		case inv.F == histories.FAcquire && op.Type == histories.OK:
			depth[id]++
			nested = nested || depth[id] > 1
		case inv.F == histories.FRelease:
			end(inv, op.Type)
		}
	}
	for _, inv := range open {
		if inv.F == histories.FRelease {
			end(inv, "")
		}
	}
	return nested, innerEnd
}

// TestKnossosWindow checks, on random histories, that a knossos-mutex
// violation's window is not linearizable on its own.
func TestKnossosWindow(t *testing.T) {
	cfg := Config{Kind: KnossosMutex}
	rapid.Check(t, func(t *rapid.T) {
		h := genLockHistory(t, KnossosMutex)
		res, err := Check(h, cfg)
		if err != nil {
			t.Fatalf("%v\n%s", err, describeHistory(h))
		}
		if res.Verdict != porcupineVerdict(t, h, cfg) {
			t.Fatalf("verdict %s differs from porcupine's\n%s", res.Verdict, describeHistory(h))
		}
		if res.Verdict == Invalid {
			kr := res.Keys[0]
			if r := windowIllegal(t, kr, cfg); r != porcupine.Illegal {
				t.Fatalf("window is %s, want Illegal; witness %q\nhistory:\n%s\nwindow:\n%s",
					r, kr.Witness, describeHistory(h), describeHistory(kr.Window))
			}
		}
	})
}
