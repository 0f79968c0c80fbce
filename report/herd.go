package report

import (
	"fmt"
	"os"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// Herd is the run's herd record: its herd.jsonl (the servers' watches sampled during
// the workload) read against the history's grants. nil when the run has no
// herd.jsonl (it was written before the herd watch existed, or broke down before its
// workload).
func Herd(d rundir.Dir, h histories.History) (*herd.Report, error) {
	if !d.Has(rundir.Herd) {
		return nil, nil
	}
	path := d.File(rundir.Herd)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	samples, err := herd.ReadSamples(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var grants []int64
	for _, op := range h {
		if !op.Process.Nemesis && op.F == histories.FAcquire && op.Type == histories.OK {
			grants = append(grants, op.Time)
		}
	}
	rep := herd.Analyze(samples, grants)
	return &rep, nil
}
