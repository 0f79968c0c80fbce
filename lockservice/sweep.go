package lockservice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// SweepConfig says what Sweep removes.
type SweepConfig struct {
	// All removes what live runs own too (cleanup --all); by default only what
	// runs whose harness is dead left.
	All bool
	// SSH, when set, sweeps its nodes too.
	SSH *SSHConfig
	// EveryNodeRun removes every run's leftovers on the nodes (cleanup): a node
	// cannot know whether another machine's harness lives. Without it only the dead
	// runs of this machine are swept there.
	EveryNodeRun bool
}

// SweepReport is what a sweep removed.
type SweepReport struct {
	// Net is what was removed of the runs' networks: namespaces (and the
	// processes in them), links and tables of the host's own namespace.
	Net netns.Report
	// Servers are the servers (processes, directories) of runs gone, every kind's.
	Servers []Leftover
	// Nodes are what was removed from SSH nodes, one line each ("node: what").
	Nodes []string
}

// Leftover is one thing a kind's sweep removed: a server process whose run's
// namespace was gone, or a server's directory (and the processes still in it).
type Leftover struct {
	Kind kind.Name
	// Short names it in a sweep's one-line summary: "redis-server 8",
	// "postgres /x/zlcpg-s1 with pids [9]".
	Short string
	// Line says what was done, for cleanup's output: "killed redis-server 8
	// (/x/redis.conf): its run's namespace was gone".
	Line string
}

// SweepFunc removes one kind's servers that outlived their runs (found by their
// processes and files on this machine, not by a run's record).
type SweepFunc func() ([]Leftover, error)

// sweepers holds each kind's sweep: written at start (init), read after.
var sweepers = map[kind.Name]SweepFunc{}

// RegisterSweep records how a kind's leftovers are swept; call it once, from the
// kind's package's init. A kind whose servers cannot outlive their namespaces
// (ZooKeeper's die with them) needs none.
func RegisterSweep(n kind.Name, sweep SweepFunc) {
	if _, taken := sweepers[n]; taken || sweep == nil {
		panic(fmt.Sprintf("lockservice: a second or nil sweep for %q", n))
	}
	sweepers[n] = sweep
}

// Sweep removes what runs left: everything named after a run (netns.Prefix) whose
// harness is dead (netns.Owned), or every run's with All. In order: the nodes' (a run
// names its node directories after its owner here), the namespaces with the
// processes in them and what the runs added to the host's own namespace, then each
// kind's servers that outlived their namespaces, and those servers' directories
// (RegisterSweep). It goes on past errors and returns them all.
func Sweep(ctx context.Context, cfg SweepConfig) (SweepReport, error) {
	var rep SweepReport
	var errs []error
	if cfg.SSH != nil {
		var err error
		rep.Nodes, err = sweepNodes(ctx, *cfg.SSH, cfg.EveryNodeRun)
		errs = append(errs, err)
	}
	var err error
	rep.Net, err = netns.CleanupAll(cfg.All)
	errs = append(errs, err)
	locals, err := sweepLocals()
	rep.Servers = append(rep.Servers, locals...)
	errs = append(errs, err)
	// After the namespaces: a server still in one belongs to a live run.
	for _, k := range kind.All() {
		if sweep := sweepers[k.Name]; sweep != nil {
			left, err := sweep()
			rep.Servers = append(rep.Servers, left...)
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// Empty reports whether the sweep removed nothing.
func (r SweepReport) Empty() bool {
	return len(r.Net.Namespaces)+len(r.Net.Links)+len(r.Net.Tables)+len(r.Servers)+len(r.Nodes) == 0
}

// Summary says in one line what the sweep removed ("" when nothing).
func (r SweepReport) Summary() string {
	var parts []string
	add := func(what string, list []string) {
		if len(list) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(list), what, strings.Join(list, ", ")))
		}
	}
	pids := make([]string, len(r.Net.Processes))
	for i, p := range r.Net.Processes {
		pids[i] = strconv.Itoa(p)
	}
	add("namespaces", r.Net.Namespaces)
	add("processes in them", pids)
	add("host links", r.Net.Links)
	add("host nft tables", r.Net.Tables)
	var servers []string
	for _, l := range r.Servers {
		servers = append(servers, l.Short)
	}
	add("servers whose run was gone", servers)
	add("things on SSH nodes", r.Nodes)
	if len(parts) == 0 {
		return ""
	}
	return "swept what dead runs left: " + strings.Join(parts, "; ")
}
