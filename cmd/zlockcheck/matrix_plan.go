package main

import (
	"context"
	"fmt"
	"io"
	"maps"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// How the matrix lays out recipes of several services (docs/matrix-services.md):
//
//   - A row is a recipe, on its own service (--service, else the recipe's); the
//     Redis settings (--redis-topology, --redis-persistence) are the Redis rows'.
//   - A Redis row runs on --redis-topology when it is given, else on the first of
//     redisTopologies that its run without faults accepts (harness.Config.Validate):
//     single for the single-instance recipes, redlock for RedLock's; its instances
//     are --nodes when given, else the topology's (1 for single, else 3).
//   - A cell is the row's run with the column's setup. When the run refuses the
//     setup (a Redis-only fault on ZooKeeper, a ZooKeeper-only one on Redis,
//     failover without replicas), and the row's topology is not --redis-topology's,
//     the cell runs on the first other topology that accepts it (failover: the
//     single-instance recipes on replicas of 3); when none does, the cell is "n/a",
//     with the refusal as its reason. Nothing here repeats a refusal: Validate says.

// redisTopologies are the Redis topologies a row or a cell may use, in the order
// they are tried.
var redisTopologies = []redis.RedisTopology{redis.RedisSingle, redis.RedisReplicas, redis.RedisRedlock}

// matrixRow is one row of the matrix: a recipe, the service and servers its runs use,
// and the options its cells start from.
type matrixRow struct {
	Recipe   string    `json:"recipe"`
	Service  kind.Name `json:"service"`
	Topology string    `json:"redis_topology,omitempty"`
	Nodes    int       `json:"nodes"`
	// opts are the row's run options (recipe, topology); search is set when a cell may
	// use another Redis topology than the row's (--redis-topology not given).
	opts   runOptions
	search bool
}

// label names the row in matrix.md: the recipe, and another service's servers.
func (r matrixRow) label() string {
	switch {
	case r.Service.Is(kind.Default):
		return r.Recipe
	case r.Topology != "":
		return fmt.Sprintf("%s (%s %s ×%d)", r.Recipe, r.Service, r.Topology, r.Nodes)
	}
	return fmt.Sprintf("%s (%s ×%d)", r.Recipe, r.Service, r.Nodes)
}

// planMatrix is every row and every cell's run, each checked (harness.Config.Prepare)
// before any runs. A row that cannot run even without faults is an error; a cell
// whose setup the row cannot run is n/a.
func planMatrix(ctx context.Context, o runOptions, names []string, setups []nemesis.Setup, stderr io.Writer) ([]matrixRow, []matrixRun, error) {
	var rows []matrixRow
	var plan []matrixRun
	for _, name := range names {
		row, err := planRow(ctx, o, name, stderr)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
		for _, s := range setups {
			plan = append(plan, planCell(ctx, row, s, stderr))
		}
	}
	return rows, plan, nil
}

// planRow finds the row's service and, for Redis, its topology: --redis-topology, or
// the first of redisTopologies whose run without faults the recipe accepts.
func planRow(ctx context.Context, o runOptions, name string, stderr io.Writer) (matrixRow, error) {
	po := o
	po.recipe, po.setup = name, &nemesis.Setup{Name: "none"}
	po.cfg.Name = "matrix-" + name
	redis := po.serviceKind() == kind.Redis
	if !redis { // a mixed matrix's Redis settings are its Redis rows'
		po.redisTopology, po.redisPersistence = "", ""
	}
	if po.serviceKind() != kind.ZooKeeper { // and its observers its ZooKeeper rows'
		po.cfg.Observers = 0
	}
	if po.serviceKind() == kind.Postgres && !o.set["nodes"] {
		po.set = maps.Clone(o.set) // a primary and a standby, so that failover runs
		if po.set == nil {
			po.set = map[string]bool{}
		}
		po.set["nodes"], po.cfg.Nodes = true, 2
	}
	search := redis && o.redisTopology == ""
	tries := []string{po.redisTopology}
	if search {
		tries = nil
		for _, t := range redisTopologies {
			tries = append(tries, string(t))
		}
	}
	var err error
	for _, t := range tries {
		po.redisTopology = t
		var cfg harness.Config
		if cfg, err = po.plan(ctx, stderr); err == nil {
			// Redis's settings are filled on Redis only: another service's topology is "".
			return matrixRow{Recipe: name, Service: cfg.Service, Nodes: cfg.Nodes, Topology: string(cfg.Redis.Topology), opts: po, search: search}, nil
		}
	}
	return matrixRow{}, fmt.Errorf("recipe %s: %w", name, err)
}

// planCell is the row's run under setup s: on the row's servers, else (search) on the
// first other Redis topology whose run accepts s, else an n/a cell that says why the
// row's run refused it.
func planCell(ctx context.Context, row matrixRow, s nemesis.Setup, stderr io.Writer) matrixRun {
	po := row.opts
	po.setup = &s
	po.cfg.Name = "matrix-" + row.Recipe + "-" + s.Name
	cfg, err := po.plan(ctx, stderr)
	for _, t := range redisTopologies {
		if err == nil || !row.search {
			break
		}
		if string(t) == row.Topology {
			continue
		}
		other := po
		other.redisTopology = string(t)
		if c, e := other.plan(ctx, stderr); e == nil {
			cfg, err = c, nil
		}
	}
	cell := matrixCell{Recipe: row.Recipe, Fault: s.Name, Service: row.Service, Topology: row.Topology, Nodes: row.Nodes}
	if err != nil {
		cell.Verdict, cell.NotApplicable = verdictNA, err.Error()
		return matrixRun{cell: cell}
	}
	cell.Seed, cell.Nodes = cfg.Seed, cfg.Nodes
	if cfg.Redis.Topology != "" {
		cell.Topology = string(cfg.Redis.Topology)
	}
	return matrixRun{cell: cell, cfg: cfg}
}
