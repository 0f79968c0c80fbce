package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// Baseline is what a plain client loop achieved on the run's servers: the yardstick
// for the harness's own overhead (worker processes, pipes, recorder).
type Baseline = lockservice.Baseline

// baselineSetUp is how long a per-process baseline gives its processes to start and
// open their sessions before their common start.
const baselineSetUp = 5 * time.Second

// runBaselineProcesses runs the plain loop as one process per worker slot (argv, the
// plain-loop command, in each slot's namespace), one session each, all starting at
// one moment, and adds up what they report (one JSON Baseline on stdout each).
func runBaselineProcesses(ctx context.Context, argv []string, hosts []netns.Host, connect, path string, d, sessionTimeout, holdMin, holdMax time.Duration, seed uint64) (Baseline, error) {
	b := Baseline{Goroutines: len(hosts), Duration: d, Processes: true}
	start := time.Now().Add(baselineSetUp)
	outs := make([]bytes.Buffer, len(hosts))
	g, gctx := errgroup.WithContext(ctx)
	for i, h := range hosts {
		cmd := h.Command(append(append([]string(nil), argv...),
			"--connect", connect, "--path", path,
			"--session-timeout", sessionTimeout.String(),
			"--start-unix-ns", strconv.FormatInt(start.UnixNano(), 10), "--duration", d.String(),
			"--hold-min", holdMin.String(), "--hold-max", holdMax.String(),
			"--seed", strconv.FormatUint(seed+uint64(i), 10))...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &outs[i], &stderr
		g.Go(func() error {
			if err := netns.RunCmd(gctx, cmd); err != nil {
				return fmt.Errorf("plain-loop process %d: %w: %s", i, err, bytes.TrimSpace(stderr.Bytes()))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return b, err
	}
	for i := range outs {
		var one Baseline
		if err := json.Unmarshal(outs[i].Bytes(), &one); err != nil {
			return b, fmt.Errorf("plain-loop process %d: its result %q: %w", i, outs[i].String(), err)
		}
		b.Cycles += one.Cycles
		b.Errors += one.Errors
	}
	return b, nil
}
