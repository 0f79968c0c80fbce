// Package conformance holds worker programs to the worker protocol (docs/protocol.md):
// it drives any worker command through the harness's own protocol client
// (workloads/driver), against a private server of the worker's service (a
// lockservice.Local: ZooKeeper, Redis, PostgreSQL, MariaDB), through a list of rules (init, reply ids,
// acquire and release, timeouts, hand-over, lost, close, EOF, bad requests, refusals,
// v2 and v3 cycles), and reports each rule passed or broken with the exchange that
// broke it. zlockcheck conformance is its CLI: the first thing to run on a new exec
// worker.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// Config says which worker to test and how.
type Config struct {
	// Argv starts one worker process; each rule starts its own.
	Argv []string
	// Kind is the workload kind sent in init (empty: mutex).
	Kind workloads.Kind
	// SessionTimeout is sent in init (0: lockservice.DefaultSessionTimeout); the bounds
	// the rules allow derive from it as the harness's do.
	SessionTimeout time.Duration
	// Service is the kind of lock service the worker locks on ("": kind.Default).
	Service kind.Name
	// Settings are the service's own, for its private server (nil: its defaults).
	Settings lockservice.Settings
	// Server is the server to use; nil starts the service's private one on
	// 127.0.0.1 (lockservice.StartLocal) for the run and stops it after.
	Server lockservice.Local
	// Only, when not empty, runs just the rules of these names.
	Only []string
	// Progress, when set, gets a line as each rule starts.
	Progress io.Writer
}

// Result is how one rule went.
type Result struct {
	Rule Rule
	// Passed: the worker kept the rule. Skipped (with the reason) counts as passed.
	Passed  bool
	Skipped string
	// Problem says how the rule was broken.
	Problem string
	// Exchange is every line sent and received while the rule ran, with the workers'
	// starts and exits; Stderr the last lines each worker logged.
	Exchange []string
	Stderr   []string
	Took     time.Duration
}

// Report is every rule's result, in order.
type Report struct {
	Results []Result
}

// OK reports whether no rule was broken.
func (r Report) OK() bool {
	for _, res := range r.Results {
		if !res.Passed {
			return false
		}
	}
	return len(r.Results) > 0
}

// Run starts the server (unless cfg.Server is given) and runs every rule in turn.
// The error is for what kept the suite from running at all (no ZooKeeper, a bad
// config); a broken rule is in the Report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if len(cfg.Argv) == 0 {
		return Report{}, fmt.Errorf("argv: no worker command")
	}
	if cfg.Kind == "" {
		cfg.Kind = workloads.Mutex
	}
	if _, err := workloads.ParseKind(string(cfg.Kind)); err != nil {
		return Report{}, fmt.Errorf("kind: %w", err)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = lockservice.DefaultSessionTimeout
	}
	rules, err := selectRules(cfg.Only)
	if err != nil {
		return Report{}, err
	}
	if cfg.Server == nil {
		srv, err := lockservice.StartLocal(ctx, cfg.Service, lockservice.LocalConfig{Settings: cfg.Settings, SessionTimeout: cfg.SessionTimeout})
		if err != nil {
			return Report{}, err
		}
		defer srv.Close()
		cfg.Server = srv
	}
	run := randomHex(4)
	var rep Report
	for _, rule := range rules {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "rule %s ...\n", rule.Name)
		}
		rep.Results = append(rep.Results, runRule(ctx, cfg, rule, "/zlc-conformance/"+run+"/"+rule.Name+"/l0"))
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

func selectRules(only []string) ([]Rule, error) {
	all := Rules()
	if len(only) == 0 {
		return all, nil
	}
	var out []Rule
	for _, name := range only {
		found := false
		for _, r := range all {
			if r.Name == name {
				out, found = append(out, r), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no rule %q (rules: %s)", name, strings.Join(ruleNames(all), ", "))
		}
	}
	return out, nil
}

func ruleNames(rules []Rule) []string {
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.Name
	}
	return names
}

// runRule runs one rule with its own workers and transcript, then kills the workers.
func runRule(ctx context.Context, cfg Config, rule Rule, path string) Result {
	log := &transcript{start: time.Now()}
	e := &env{ctx: ctx, cfg: cfg, log: log, path: path}
	res := Result{Rule: rule}
	err := rule.check(e)
	e.stopAll()
	res.Took = time.Since(log.start)
	var skip skipped
	switch {
	case asSkip(err, &skip):
		res.Passed, res.Skipped = true, string(skip)
	case err != nil:
		res.Problem = err.Error()
	default:
		res.Passed = true
	}
	// A violation anywhere in the exchange breaks the rule, whatever else happened.
	for _, w := range e.workers {
		if v := w.Violations(); len(v) > 0 && res.Problem == "" {
			res.Passed, res.Skipped, res.Problem = false, "", "protocol violation: "+v[0]
		}
	}
	if !res.Passed {
		res.Exchange = log.snapshot()
		for _, w := range e.workers {
			for _, l := range w.stderrTail(8) {
				res.Stderr = append(res.Stderr, w.name+": "+l)
			}
		}
	}
	return res
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Write prints the report: one line per rule, and for each broken rule the problem,
// the exchange that broke it and the workers' last stderr lines.
func (r Report) Write(w io.Writer) {
	broken := 0
	for _, res := range r.Results {
		switch {
		case !res.Passed:
			broken++
			fmt.Fprintf(w, "BROKEN  %-15s %s\n", res.Rule.Name, res.Rule.Says)
			fmt.Fprintf(w, "        problem: %s\n", res.Problem)
			fmt.Fprintf(w, "        exchange (> sent to the worker, < received):\n")
			for _, l := range res.Exchange {
				fmt.Fprintf(w, "          %s\n", l)
			}
			if len(res.Stderr) > 0 {
				fmt.Fprintf(w, "        workers' stderr (last lines):\n")
				for _, l := range res.Stderr {
					fmt.Fprintf(w, "          %s\n", l)
				}
			}
		case res.Skipped != "":
			fmt.Fprintf(w, "skipped %-15s %s (%s)\n", res.Rule.Name, res.Rule.Says, res.Skipped)
		default:
			fmt.Fprintf(w, "passed  %-15s %s (%.1fs)\n", res.Rule.Name, res.Rule.Says, res.Took.Seconds())
		}
	}
	fmt.Fprintf(w, "%d of %d rules passed, %d broken\n", len(r.Results)-broken, len(r.Results), broken)
}
