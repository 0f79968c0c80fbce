package lockservice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/netns"
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
	// Redis are the redis-servers killed whose namespace was gone.
	Redis []LeftRedis
	// Databases are the database servers (processes, directories) of runs gone.
	Databases []LeftDatabase
	// Nodes are what was removed from SSH nodes, one line each ("node: what").
	Nodes []string
}

// Sweep removes what runs left: everything named after a run (netns.Prefix) whose
// harness is dead (netns.Owned), or every run's with All. In order: the nodes' (a run
// names its node directories after its owner here), the namespaces with the
// processes in them and what the runs added to the host's own namespace, then the
// Redis and database servers that outlived their namespaces, and those servers'
// directories. It goes on past errors and returns them all.
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
	// After the namespaces: a server still in one belongs to a live run.
	rep.Redis, err = CleanupRedis()
	errs = append(errs, err)
	rep.Databases, err = CleanupDatabases()
	errs = append(errs, err)
	return rep, errors.Join(errs...)
}

// Empty reports whether the sweep removed nothing.
func (r SweepReport) Empty() bool {
	return len(r.Net.Namespaces)+len(r.Net.Links)+len(r.Net.Tables)+len(r.Redis)+len(r.Databases)+len(r.Nodes) == 0
}

// Summary says in one line what the sweep removed ("" when nothing).
func (r SweepReport) Summary() string {
	var parts []string
	add := func(what string, list []string) {
		if len(list) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(list), what, strings.Join(list, ", ")))
		}
	}
	pids := func(pids []int) []string {
		out := make([]string, len(pids))
		for i, p := range pids {
			out[i] = strconv.Itoa(p)
		}
		return out
	}
	add("namespaces", r.Net.Namespaces)
	add("processes in them", pids(r.Net.Processes))
	add("host links", r.Net.Links)
	add("host nft tables", r.Net.Tables)
	var redis []int
	for _, l := range r.Redis {
		redis = append(redis, l.Pid)
	}
	add("redis-servers", pids(redis))
	var dbs []string
	for _, d := range r.Databases {
		db := fmt.Sprintf("%s %s", d.Kind, d.Dir)
		if len(d.Pids) > 0 {
			db += fmt.Sprintf(" with pids %v", d.Pids)
		}
		dbs = append(dbs, db)
	}
	add("database servers", dbs)
	add("things on SSH nodes", r.Nodes)
	if len(parts) == 0 {
		return ""
	}
	return "swept what dead runs left: " + strings.Join(parts, "; ")
}
