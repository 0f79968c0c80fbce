package lockservice

import (
	"slices"
	"time"
)

// Baseline is what a plain client lock loop achieved on the servers (go-zookeeper's
// on an Ensemble, go-redis's on Redis: Redis.PlainLoops): the yardstick for the
// harness's own overhead (worker processes, pipes, recorder).
type Baseline struct {
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration_ns"`
	Cycles     int64         `json:"cycles"`
	Errors     int64         `json:"errors"`
	// Processes says the loop ran one OS process per session, each in a worker slot's
	// namespace as the workers do (Config.BaselineArgv), not as goroutines of the
	// harness's process.
	Processes bool `json:"processes,omitempty"`
	// AcquireP50 and AcquireP99 are the median and 99th percentile of the time from
	// asking for the lock to holding it (waiting for other holders included), over
	// every granted acquire; zero when none was granted or they were not measured
	// (a per-process baseline adds up counts only).
	AcquireP50 time.Duration `json:"acquire_p50_ns,omitempty"`
	AcquireP99 time.Duration `json:"acquire_p99_ns,omitempty"`
}

// CyclesPerSecond is the baseline's lock cycles (acquire+release) per second.
func (b Baseline) CyclesPerSecond() float64 { return float64(b.Cycles) / b.Duration.Seconds() }

// LoopCount is what a plain loop (one goroutine, or all of them) achieved: cycles
// completed, calls that failed, and the latency of each granted acquire.
type LoopCount struct {
	Cycles, Errs int64
	Acquires     []time.Duration
}

// SumCounts adds up the goroutines' counts.
func SumCounts(counts []LoopCount) LoopCount {
	var all LoopCount
	for _, c := range counts {
		all.Cycles += c.Cycles
		all.Errs += c.Errs
		all.Acquires = append(all.Acquires, c.Acquires...)
	}
	return all
}

// Fill sets a Baseline's cycles, errors and acquire percentiles.
func (c LoopCount) Fill(b *Baseline) {
	b.Cycles, b.Errors = c.Cycles, c.Errs
	sorted := slices.Clone(c.Acquires)
	slices.Sort(sorted)
	b.AcquireP50, b.AcquireP99 = Percentile(sorted, 50), Percentile(sorted, 99)
}

// Percentile is the p-th percentile (nearest rank) of sorted durations, 0 of none.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	return sorted[min(max(rank, 1), len(sorted))-1]
}
