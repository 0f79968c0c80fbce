package lockservice

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestPlainLoopRefusesBadConfig(t *testing.T) {
	good := PlainLoopConfig{Servers: []string{"127.0.0.1:1"}, Path: "/l", SessionTimeout: time.Second,
		Duration: time.Second, HoldMin: time.Millisecond, HoldMax: time.Millisecond}
	for name, change := range map[string]func(*PlainLoopConfig){
		"no servers":      func(c *PlainLoopConfig) { c.Servers = nil },
		"no path":         func(c *PlainLoopConfig) { c.Path = "" },
		"no duration":     func(c *PlainLoopConfig) { c.Duration = 0 },
		"no timeout":      func(c *PlainLoopConfig) { c.SessionTimeout = 0 },
		"inverted holds":  func(c *PlainLoopConfig) { c.HoldMin = 2 * time.Millisecond },
		"a negative hold": func(c *PlainLoopConfig) { c.HoldMin, c.HoldMax = -time.Millisecond, 0 },
	} {
		cfg := good
		change(&cfg)
		if _, err := PlainLoop(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "plain loop") {
			t.Errorf("%s: %v, want a plain loop error", name, err)
		}
	}
}

func TestLoopCountPercentiles(t *testing.T) {
	var counts []loopCount
	for g := range 4 {
		c := loopCount{cycles: 25, errs: int64(g)}
		for i := range 25 {
			c.acquires = append(c.acquires, time.Duration(100-(g*25+i))*time.Millisecond)
		}
		counts = append(counts, c)
	}
	var b Baseline
	sumCounts(counts).fill(&b)
	if b.Cycles != 100 || b.Errors != 6 || b.AcquireP50 != 50*time.Millisecond || b.AcquireP99 != 99*time.Millisecond {
		t.Errorf("got %+v, want 100 cycles, 6 errors, p50 50ms, p99 99ms", b)
	}
	var none Baseline
	loopCount{}.fill(&none)
	if none.AcquireP50 != 0 || none.AcquireP99 != 0 {
		t.Errorf("no acquires: %+v, want zero percentiles", none)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("one acquire's p99: %s", got)
	}
}
