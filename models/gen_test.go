package models

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

func TestGenerateMutexHistory(t *testing.T) {
	cfg := GenConfig{Ops: 20000, Processes: 50, CrashRate: 0.05, Seed: 3}
	h := GenerateMutexHistory(cfg)
	if len(h) != cfg.Ops {
		t.Fatalf("%d ops, want %d", len(h), cfg.Ops)
	}
	if !reflect.DeepEqual(h, GenerateMutexHistory(cfg)) {
		t.Fatal("same config, different histories")
	}
	count := map[histories.Type]int{}
	procs := map[int]bool{}
	for i, op := range h {
		if op.Index != int64(i) {
			t.Fatalf("op %d has index %d", i, op.Index)
		}
		count[op.Type]++
		procs[op.Process.ID] = true
	}
	crashed := float64(count[histories.Info]) / float64(count[histories.Invoke])
	if crashed < 0.04 || crashed > 0.06 {
		t.Errorf("%.3f of ops crashed, want about 0.05", crashed)
	}
	if count[histories.OK] < count[histories.Invoke]/10 || count[histories.Fail] == 0 {
		t.Errorf("outcomes: %v", count)
	}
	// Every crash retires a process; its worker comes back as a new one.
	if len(procs) <= count[histories.Info] {
		t.Errorf("%d processes for %d workers and %d crashes", len(procs), cfg.Processes, count[histories.Info])
	}
}

// TestGeneratedHistories checks the generator's promise (valid without
// planted double grants, invalid with them), with the holds checker and,
// on the valid ones, where it is fast, with porcupine too.
func TestGeneratedHistories(t *testing.T) {
	m := newLockModel(Mutex, 1)
	for seed := int64(1); seed <= 5; seed++ {
		h := GenerateMutexHistory(GenConfig{Ops: 30000, Processes: 50, CrashRate: 0.05, Seed: seed})
		res, err := Check(h, Config{Kind: Mutex})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Valid {
			t.Fatalf("seed %d: %s: %s", seed, res.Verdict, res.Keys[0].Witness)
		}
		p, _ := parse(h, Mutex)
		ops := window(p, toPops(p, 0, Mutex), math.MinInt64, math.MaxInt64, false)
		if r := porcupine.CheckOperationsTimeout(m.porcupineModel(initFree), ops, 20*time.Second); r != porcupine.Ok {
			t.Fatalf("seed %d: porcupine says %s", seed, r)
		}

		h = GenerateMutexHistory(GenConfig{Ops: 30000, Processes: 50, CrashRate: 0.05, DoubleGrants: 3, Seed: seed})
		res, err = Check(h, Config{Kind: Mutex})
		if err != nil {
			t.Fatal(err)
		}
		kr := res.Keys[0]
		if res.Verdict != Invalid || len(kr.Window) == 0 || len(kr.Window) > 40 {
			t.Fatalf("seed %d with double grants: %s, window of %d ops", seed, res.Verdict, len(kr.Window))
		}
		if r := windowIllegal(t, kr, Config{Kind: Mutex}); r != porcupine.Illegal {
			t.Fatalf("seed %d: window is %s", seed, r)
		}
	}
}

// TestPorcupineAloneGivesUp documents why the holds checker exists: on a
// 2,000-line history with one double grant, porcupine does not finish in
// half a second (it backtracks through every interleaving of 50 processes),
// while the holds checker finds the violation at once.
func TestPorcupineAloneGivesUp(t *testing.T) {
	h := GenerateMutexHistory(GenConfig{Ops: 2000, Processes: 50, CrashRate: 0.05, DoubleGrants: 1, Seed: 1})
	start := time.Now()
	res, err := Check(h, Config{Kind: Mutex})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if res.Verdict != Invalid {
		t.Fatalf("holds checker says %s", res.Verdict)
	}
	p, _ := parse(h, Mutex)
	ops := window(p, toPops(p, 0, Mutex), math.MinInt64, math.MaxInt64, false)
	start = time.Now()
	r := porcupine.CheckOperationsTimeout(newLockModel(Mutex, 1).porcupineModel(initFree), ops, 500*time.Millisecond)
	t.Logf("holds checker: %s in %v; porcupine alone: %s after %v", res.Verdict, took, r, time.Since(start))
	if r == porcupine.Ok {
		t.Fatal("porcupine says Ok")
	}
}
