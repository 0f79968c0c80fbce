package models

import (
	"testing"
	"time"
)

func TestZZSmoke(t *testing.T) {
	for _, n := range []int{100000, 1000000} {
		for _, dg := range []int{0, 1} {
			start := time.Now()
			h := GenerateMutexHistory(GenConfig{Ops: n, Processes: 50, CrashRate: 0.05, DoubleGrants: dg, Seed: 1})
			gen := time.Since(start)
			counts := map[string]int{}
			for _, op := range h {
				counts[string(op.Type)]++
			}
			start = time.Now()
			r, err := Check(h, Config{Kind: Mutex})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("n=%d dg=%d gen=%v check=%v verdict=%s counts=%v", n, dg, gen, time.Since(start), r.Verdict, counts)
			for _, k := range r.Keys {
				t.Logf("  %s %s window=%d first=%d\n  %s", k.Key, k.Verdict, len(k.Window), k.FirstViolation, k.Witness); for _, op := range k.Window { if n == 100000 { t.Logf("%+v", op) } }
			}
		}
	}
}
