// Package matrix is the safety matrix: every recipe under every fault setup, one
// harness.Test a cell, across services. It plans the rows and cells (Plan), runs them
// in order (Plan.Run), and writes matrix.json and matrix.md as it goes, as etcd's
// robustness scenarios and Jepsen's test-all run a list of tests. A caller of the
// harness, like explore, it sits under it; cmd only reads the flags and prints.
//
// How a matrix lays out recipes of several services (docs/matrix-services.md):
//
//   - A row is a recipe on its own service (the base's, else the recipe's); the
//     base's settings of another kind (Redis's topology and persistence, ZooKeeper's
//     observers, a database's keepalive) are that kind's rows' only
//     (harness.Config.ForRecipe).
//   - A row whose kind can be deployed in several ways and whose base leaves the
//     choice open (Redis's topologies) runs on the first deployment its run without
//     faults accepts (harness.Config.Deployments, Validate): single for the
//     single-instance recipes, redlock for RedLock's.
//   - A cell is the row's run with the column's setup, less the classes the run
//     refuses when others are left (a partition of one instance: the server
//     faults column kills and pauses it). When the run refuses the
//     setup and the row's deployment was chosen, the cell runs on the first other
//     deployment that accepts it (failover: the single-instance recipes on replicas
//     of 3); when none does, the cell is n/a, with the refusal as its reason. Nothing
//     here repeats a refusal: Validate says.
package matrix

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/recipes"
)

// NA is an n/a cell's verdict: its setup cannot run on its row's service or
// deployment. It counts in no verdict.
const NA models.Verdict = "n/a"

// Cell is one run of the matrix, or a cell whose setup its row refuses (NA).
type Cell struct {
	Recipe  string         `json:"recipe"`
	Fault   string         `json:"fault"`
	Verdict models.Verdict `json:"verdict"`
	// Cause is the first violation's cause class (package cause), when known.
	Cause string `json:"cause,omitempty"`
	// Service, Topology and Nodes are the servers the cell ran on: the row's, or
	// another deployment the setup needs (Redis's topology).
	Service  kind.Name `json:"service,omitempty"`
	Topology string    `json:"redis_topology,omitempty"`
	Nodes    int       `json:"nodes,omitempty"`
	// NotApplicable is why the setup cannot run on the row (the run's refusal), for
	// an NA cell.
	NotApplicable string `json:"not_applicable,omitempty"`
	// FirstViolationSeconds is the time from the run's start to its first violation.
	FirstViolationSeconds *float64 `json:"first_violation_seconds,omitempty"`
	Ops                   int      `json:"ops"`
	Seed                  int64    `json:"seed"`
	Dir                   string   `json:"dir,omitempty"`
	Error                 string   `json:"error,omitempty"`
	Witness               string   `json:"witness,omitempty"`
	// Herd is the run's herd record (nil when it has none): the herd column.
	Herd *herd.Report `json:"herd,omitempty"`
}

// Row is one row of the matrix: a recipe, and the service and servers its runs use.
type Row struct {
	Recipe   string    `json:"recipe"`
	Service  kind.Name `json:"service"`
	Topology string    `json:"redis_topology,omitempty"`
	Nodes    int       `json:"nodes"`
	// open is the row's run before a deployment is chosen, base its run without
	// faults on the chosen one (before Prepare); chosen is set when the matrix chose
	// it, and a cell may take another.
	open, base harness.Config
	chosen     bool
}

// Label names the row in matrix.md: the recipe, and the servers of a service other
// than the default.
func (r Row) Label() string {
	switch {
	case r.Service.Is(kind.Default):
		return r.Recipe
	case r.Topology != "":
		return fmt.Sprintf("%s (%s %s ×%d)", r.Recipe, r.Service, r.Topology, r.Nodes)
	}
	return fmt.Sprintf("%s (%s ×%d)", r.Recipe, r.Service, r.Nodes)
}

// Run is one planned cell: its record so far, and its run's configuration (none for
// an NA cell).
type Run struct {
	Cell   Cell
	Config harness.Config
}

// Plan is a matrix ready to run: its base, rows, columns and cells in order.
type Plan struct {
	Base   harness.Config
	Rows   []Row
	Setups []nemesis.Setup
	Runs   []Run
}

// New plans the matrix of recipes × setups on base (its Recipe, faults and Name are
// set per cell): every row and every cell's run checked (harness.Config.Prepare)
// before any runs. given are service settings of several kinds (the flags'): each
// row takes the one of its kind, if any. A row that cannot run even without faults
// is an error; a cell whose setup the row cannot run is NA.
func New(ctx context.Context, base harness.Config, recipes []string, setups []nemesis.Setup, given ...lockservice.Settings) (Plan, error) {
	p := Plan{Base: base, Setups: setups}
	for _, name := range recipes {
		row, err := planRow(ctx, base, name, given)
		if err != nil {
			return Plan{}, err
		}
		p.Rows = append(p.Rows, row)
		for _, s := range setups {
			p.Runs = append(p.Runs, planCell(ctx, row, s))
		}
	}
	return p, nil
}

// planRow finds the row's service and deployment: the base's, or the first of the
// kind's deployments whose run without faults the recipe accepts.
func planRow(ctx context.Context, base harness.Config, name string, given []lockservice.Settings) (Row, error) {
	open := base.ForRecipe(name, given...).AsRow()
	open.Name = "matrix-" + name
	deployments := open.WithSetup(nemesis.Setup{Name: "none"}).Deployments()
	var err error
	for _, d := range deployments {
		var cfg harness.Config
		if cfg, err = d.Prepare(ctx); err == nil {
			return Row{Recipe: name, Service: cfg.Service, Nodes: cfg.Nodes, Topology: cfg.Deployment(),
				open: open, base: d, chosen: len(deployments) > 1}, nil
		}
	}
	return Row{}, fmt.Errorf("recipe %s: %w", name, err)
}

// planCell is the row's run under setup s: on the row's deployment, less the classes
// it refuses when others are left (harness.Config.Runnable: the server faults'
// partition on one instance), else (when the matrix chose the deployment) on the
// first other one whose run accepts s, else an NA cell that says why the row's run
// refused it.
func planCell(ctx context.Context, row Row, s nemesis.Setup) Run {
	if kept, err := row.base.Runnable(s); err == nil {
		s = kept
	}
	c := row.base.WithSetup(s)
	c.Name = "matrix-" + row.Recipe + "-" + s.Name
	cfg, err := c.Prepare(ctx)
	if err != nil && row.chosen {
		for _, d := range row.open.WithSetup(s).Deployments() {
			d.Name = c.Name
			if other, e := d.Prepare(ctx); e == nil {
				cfg, err = other, nil
				break
			}
		}
	}
	cell := Cell{Recipe: row.Recipe, Fault: s.Name, Service: row.Service, Topology: row.Topology, Nodes: row.Nodes}
	if err != nil {
		cell.Verdict, cell.NotApplicable = NA, err.Error()
		return Run{Cell: cell}
	}
	cell.Seed, cell.Nodes = cfg.Seed, cfg.Nodes
	if t := cfg.Deployment(); t != "" {
		cell.Topology = t
	}
	return Run{Cell: cell, Config: cfg}
}

// DefaultSetups are a matrix's columns when none are named: nemesis.Setups (a
// matrix of the default kind's recipes, as ever), and nemesis.NamedSetups too when
// a recipe's service can take a fault that needs an ability (failover, clock-jump,
// connection-kill).
func DefaultSetups(recipes []string) []nemesis.Setup {
	for _, name := range recipes {
		k := kind.Of(harness.RecipeService(name))
		for _, s := range nemesis.NamedSetups() {
			if slices.ContainsFunc(s.Classes, func(cl nemesis.Class) bool { return cl.Needs() != 0 && k.Can(cl.Needs()) }) {
				return AllSetups()
			}
		}
	}
	return nemesis.Setups()
}

// AllSetups are every named setup a matrix can have: nemesis.Setups, then
// nemesis.NamedSetups.
func AllSetups() []nemesis.Setup { return append(nemesis.Setups(), nemesis.NamedSetups()...) }

// RecipesOf are the real recipes of service k, a matrix's rows when none are named.
func RecipesOf(k kind.Name) []string {
	var out []string
	for _, n := range recipes.RealNames() {
		if harness.RecipeService(n) == kind.Of(k).Name {
			out = append(out, n)
		}
	}
	return out
}

// Run runs the plan's cells in order (an NA cell is recorded, not run), rewriting
// matrix.json and matrix.md in dir after each, logging a line per cell to log, and
// returns the worst verdict.
func (p Plan) Run(ctx context.Context, dir string, log io.Writer) (models.Verdict, error) {
	runs := 0
	for _, r := range p.Runs {
		if r.Cell.Verdict != NA {
			runs++
		}
	}
	d := p.Base.Defaults()
	fmt.Fprintf(log, "matrix: %d recipes × %d fault setups = %d runs of %s (%d n/a)\n", len(p.Rows), len(p.Setups), runs, d.Duration, len(p.Runs)-runs)
	var cells []Cell
	worst := models.Valid
	for i, r := range p.Runs {
		if ctx.Err() != nil {
			break
		}
		cell := r.Cell
		if cell.Verdict != NA {
			cell = runCell(ctx, r)
			worst = models.Worse(worst, cell.Verdict)
		}
		cells = append(cells, cell)
		fmt.Fprintf(log, "[%d/%d] %-20s %-24s %s\n", i+1, len(p.Runs), cell.Recipe, cell.Fault, describeCell(cell))
		if err := p.Write(dir, cells); err != nil {
			return worst, err
		}
	}
	return worst, nil
}

// runCell tests one cell of the matrix.
func runCell(ctx context.Context, r Run) Cell {
	cell := r.Cell
	t, err := harness.Test(ctx, r.Config)
	res := t.Results
	cell.Verdict, cell.Ops, cell.Dir, cell.Herd = res.Verdict, res.Ops, res.Dir, res.Herd
	for _, c := range res.Checks {
		if c.Verdict == models.Invalid && (cell.FirstViolationSeconds == nil || (c.FirstViolationSeconds != nil && *c.FirstViolationSeconds < *cell.FirstViolationSeconds)) {
			cell.FirstViolationSeconds, cell.Witness, cell.Cause = c.FirstViolationSeconds, c.Witness, ""
			if c.Cause != nil {
				cell.Cause = string(c.Cause.Class)
			}
		}
	}
	if err != nil {
		cell.Error = err.Error()
		if cell.Verdict == "" || cell.Verdict == models.Valid {
			cell.Verdict = models.Error
		}
	}
	return cell
}

// describeCell is a cell's line in the log.
func describeCell(c Cell) string {
	s := string(c.Verdict)
	if c.Verdict == NA {
		return s + ": " + c.NotApplicable
	}
	if c.FirstViolationSeconds != nil {
		s += fmt.Sprintf(" at %.1fs", *c.FirstViolationSeconds)
	}
	if c.Cause != "" {
		s += " (" + c.Cause + ")"
	}
	s += fmt.Sprintf(" (%d ops)", c.Ops)
	if c.Error != "" {
		s += ": " + c.Error
	}
	return s
}
