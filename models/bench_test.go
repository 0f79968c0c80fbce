package models

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

var benchHistories = map[GenConfig]histories.History{}

func benchHistory(cfg GenConfig) histories.History {
	h, ok := benchHistories[cfg]
	if !ok {
		h = GenerateMutexHistory(cfg)
		benchHistories[cfg] = h
	}
	return h
}

func benchName(ops, grants int) string {
	name := fmt.Sprintf("ops=%dk", ops/1000)
	if ops >= 1000000 {
		name = fmt.Sprintf("ops=%dM", ops/1000000)
	}
	if grants == 0 {
		return name + "/valid"
	}
	return name + "/double-grant"
}

// BenchmarkCheckMutex checks generated mutex histories (50 processes, 5% of
// ops crashed), valid and with one planted double grant, with the holds
// checker.
func BenchmarkCheckMutex(b *testing.B) {
	for _, ops := range []int{100000, 1000000} {
		for _, grants := range []int{0, 1} {
			b.Run(benchName(ops, grants), func(b *testing.B) {
				h := benchHistory(GenConfig{Ops: ops, Processes: 50, CrashRate: 0.05, DoubleGrants: grants, Seed: 1})
				want := Valid
				if grants > 0 {
					want = Invalid
				}
				b.ReportAllocs()
				for b.Loop() {
					res, err := Check(h, Config{Kind: Mutex})
					if err != nil || res.Verdict != want {
						b.Fatalf("%s, %v", res.Verdict, err)
					}
				}
				b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
			})
		}
	}
}

// BenchmarkPorcupineAlone runs porcupine with the owner-aware mutex model
// on the same kind of histories, with a 2s budget: it finishes on valid
// ones but not on one with a single double grant, even of 1,000 lines. The
// "finished" metric is 1 when porcupine decided, 0 when it ran out of time.
func BenchmarkPorcupineAlone(b *testing.B) {
	m := newLockModel(Mutex, 1)
	for _, ops := range []int{1000, 10000, 100000} {
		for _, grants := range []int{0, 1} {
			b.Run(benchName(ops, grants), func(b *testing.B) {
				h := benchHistory(GenConfig{Ops: ops, Processes: 50, CrashRate: 0.05, DoubleGrants: grants, Seed: 1})
				p, err := parse(h, Mutex)
				if err != nil {
					b.Fatal(err)
				}
				pops := window(p, toPops(p, 0, Mutex), math.MinInt64, math.MaxInt64, false)
				finished := 0.0
				for b.Loop() {
					if porcupine.CheckOperationsTimeout(m.porcupineModel(initFree), pops, 2*time.Second) != porcupine.Unknown {
						finished = 1
					}
				}
				b.ReportMetric(finished, "finished")
			})
		}
	}
}
