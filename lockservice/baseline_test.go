package lockservice

import (
	"testing"
	"time"
)

func TestLoopCountPercentiles(t *testing.T) {
	var counts []LoopCount
	for g := range 4 {
		c := LoopCount{Cycles: 25, Errs: int64(g)}
		for i := range 25 {
			c.Acquires = append(c.Acquires, time.Duration(100-(g*25+i))*time.Millisecond)
		}
		counts = append(counts, c)
	}
	var b Baseline
	SumCounts(counts).Fill(&b)
	if b.Cycles != 100 || b.Errors != 6 || b.AcquireP50 != 50*time.Millisecond || b.AcquireP99 != 99*time.Millisecond {
		t.Errorf("got %+v, want 100 cycles, 6 errors, p50 50ms, p99 99ms", b)
	}
	var none Baseline
	LoopCount{}.Fill(&none)
	if none.AcquireP50 != 0 || none.AcquireP99 != 0 {
		t.Errorf("no acquires: %+v, want zero percentiles", none)
	}
	if got := Percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("one acquire's p99: %s", got)
	}
}
