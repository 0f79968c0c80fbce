package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// noSweepUsage is --no-sweep's help, the same on every command that runs.
const noSweepUsage = "leave what runs whose harness is dead left (namespaces, links, tables, servers and their directories, here and on the SSH nodes the run names): by default it is removed first, and said in one line (zlockcheck cleanup removes it by hand)"

// sweepDead is what run, explore, matrix and replay do first, unless skip: remove
// what runs whose harness is dead left on this machine and on nodes (nil: none),
// and say in one line on stderr what went. A failed sweep is reported and the
// command goes on: a live run's things are never what it failed on.
func sweepDead(ctx context.Context, skip bool, nodes *lockservice.SSHConfig, stderr io.Writer) {
	if skip {
		return
	}
	rep, err := lockservice.Sweep(ctx, lockservice.SweepConfig{SSH: nodes})
	if line := rep.Summary(); line != "" {
		fmt.Fprintln(stderr, line)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sweeping what dead runs left: %v (going on)\n", err)
	}
}
