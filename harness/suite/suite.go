// Package suite runs a suite: every recipe × fault classes × seed of a run file's
// suite section, with the rest of the run in common, one harness.Test each, as
// Jepsen's test-all runs a list of tests. cmd reads the file and the flags and prints
// the table; this package makes each run's configuration and runs them in order.
package suite

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Spec is a suite: lists whose product is its runs. An empty list is the base's own
// value (its recipe, its faults, its seed).
type Spec struct {
	Recipes []string
	// Nemesis are fault classes as --nemesis takes them: "kill,pause", none, all.
	Nemesis []string
	Seeds   []int64
}

// Run is one run of a suite: the recipe, fault classes and seed that make it (""
// and 0: the base's).
type Run struct {
	Recipe, Nemesis string
	Seed            int64
}

// Runs lists the suite's runs: the product of its lists, in their order.
func (s Spec) Runs() []Run {
	recipes, faults, seeds := s.Recipes, s.Nemesis, s.Seeds
	if len(recipes) == 0 {
		recipes = []string{""}
	}
	if len(faults) == 0 {
		faults = []string{""}
	}
	if len(seeds) == 0 {
		seeds = []int64{0}
	}
	var out []Run
	for _, r := range recipes {
		for _, n := range faults {
			for _, sd := range seeds {
				out = append(out, Run{Recipe: r, Nemesis: n, Seed: sd})
			}
		}
	}
	return out
}

// Plan is a suite ready to run on a base configuration.
type Plan struct {
	// Base is what every run has in common; Given are service settings of several
	// kinds (the flags'): each run takes the one of its recipe's kind, if any.
	Base  harness.Config
	Given []lockservice.Settings
	Runs  []Run
}

// Config is run r's configuration: the base with r's recipe (its service, and that
// kind's settings among Given), fault classes and seed.
func (p Plan) Config(r Run) (harness.Config, error) {
	c := p.Base
	if r.Recipe != "" && r.Recipe != c.Recipe {
		switch {
		case r.Recipe == "exec" && len(c.WorkerArgv) == 0:
			return c, fmt.Errorf("recipe exec: needs --worker-cmd")
		case r.Recipe != "exec":
			c.WorkerArgv = nil // the catalogue's recipe's own (harness.WorkerSetup)
		}
		c.Recipe = r.Recipe
	}
	c = c.ForRecipe(c.Recipe, p.Given...)
	if r.Nemesis != "" {
		classes, err := nemesis.ParseClasses(r.Nemesis)
		if err != nil {
			return c, fmt.Errorf("nemesis: %w", err)
		}
		c.Nemesis = classes
	}
	if r.Seed != 0 {
		c.Seed = r.Seed
	}
	return c, nil
}

// Row is one run's outcome.
type Row struct {
	// Run is what ran: its recipe, faults and the seed it used.
	Run     Run
	Verdict models.Verdict
	// Note is the error of a run whose verdict is models.Error.
	Note string
	// Dir is the run's directory ("" when none was made).
	Dir string
	// Removed: a valid run's directory was removed (harness.KeepFailed).
	Removed bool
}

// Run runs the suite's runs in order, a line on log before each, and returns a row
// each and the worst verdict. ctx's end stops it after the run in flight: the rows
// are then fewer than the runs.
func (p Plan) Run(ctx context.Context, log io.Writer) ([]Row, models.Verdict) {
	worst := models.Valid
	var rows []Row
	for i, r := range p.Runs {
		if ctx.Err() != nil {
			break
		}
		row := p.test(ctx, r, log, fmt.Sprintf("[%d/%d]", i+1, len(p.Runs)))
		worst = models.Worse(worst, row.Verdict)
		rows = append(rows, row)
	}
	return rows, worst
}

// test runs one run of the suite.
func (p Plan) test(ctx context.Context, r Run, log io.Writer, counter string) Row {
	row := Row{Run: p.filled(r), Verdict: models.Error}
	cfg, err := p.Config(r)
	fmt.Fprintf(log, "%s %s, nemesis %s, seed %d\n", counter, row.Run.Recipe, row.Run.Nemesis, row.Run.Seed)
	if err != nil {
		row.Note = "error: " + err.Error()
		return row
	}
	t, err := harness.Test(ctx, cfg)
	if t.RunErr != nil && t.Results.Dir != "" {
		fmt.Fprintf(log, "%s run: %v\n", counter, t.RunErr)
	}
	row.Run.Seed, row.Dir, row.Removed = t.Config.Seed, t.Results.Dir, t.Removed
	if err != nil {
		row.Note = "error: " + err.Error()
		return row
	}
	row.Verdict = t.Results.Verdict
	return row
}

// filled is r with the base's values in place of its empty ones.
func (p Plan) filled(r Run) Run {
	if r.Recipe == "" {
		r.Recipe = p.Base.Recipe
	}
	if r.Nemesis == "" {
		r.Nemesis = faultsOf(p.Base.Nemesis)
	}
	if r.Seed == 0 {
		r.Seed = p.Base.Seed
	}
	return r
}

// faultsOf names fault classes as --nemesis takes them.
func faultsOf(classes []nemesis.Class) string {
	if len(classes) == 0 {
		return "none"
	}
	s := make([]string, len(classes))
	for i, c := range classes {
		s[i] = string(c)
	}
	return strings.Join(s, ",")
}
