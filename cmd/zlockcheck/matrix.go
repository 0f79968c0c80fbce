package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// matrixCell is one run of the matrix.
type matrixCell struct {
	Recipe  string         `json:"recipe"`
	Fault   string         `json:"fault"`
	Verdict models.Verdict `json:"verdict"`
	// FirstViolationSeconds is the time from the run's start to its first violation.
	FirstViolationSeconds *float64 `json:"first_violation_seconds,omitempty"`
	Ops                   int      `json:"ops"`
	Seed                  int64    `json:"seed"`
	Dir                   string   `json:"dir,omitempty"`
	Error                 string   `json:"error,omitempty"`
	Witness               string   `json:"witness,omitempty"`
	// Herd is the run's herd record (nil when it has none): the matrix's herd column.
	Herd *herd.Report `json:"herd,omitempty"`
}

// matrixCmd runs every recipe under every named fault setup (nemesis.Setups), one
// harness.Test each, writes matrix.json and matrix.md as it goes, and exits with the
// worst cell's verdict.
func matrixCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("matrix", stderr)
	var o runOptions
	o.register(fs)
	recipesF := fs.String("recipes", "", "comma-separated recipes (default: every real ZooKeeper recipe)")
	faultsF := fs.String("faults", "", "comma-separated fault classes (default: all of "+setupNames(nemesis.Setups())+")")
	out := fs.String("out", "", "directory for matrix.json and matrix.md (default STORE/matrix/<timestamp>)")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	o.quiet = true
	names := serviceRecipes(realRecipeNames(), lockservice.KindZooKeeper)
	if *recipesF != "" {
		names = splitList(*recipesF)
	}
	if err := matrixOnZooKeeper(o, names); err != nil {
		return exitError, err
	}
	setups, err := pickSetups(*faultsF)
	if err != nil {
		return exitError, fmt.Errorf("--faults: %w", err)
	}
	plan, err := planMatrix(ctx, o, names, setups, stderr)
	if err != nil {
		return exitError, err
	}
	dir := *out
	if dir == "" {
		dir = rundir.MatrixDir(o.cfg.Store, time.Now())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return exitError, err
	}
	fmt.Fprintf(stderr, "matrix: %d recipes × %d fault classes = %d runs of %s\n", len(names), len(setups), len(plan), o.cfg.Duration)
	var cells []matrixCell
	worst := models.Valid
	for i, p := range plan {
		if ctx.Err() != nil {
			break
		}
		cell := runCell(ctx, p)
		cells = append(cells, cell)
		fmt.Fprintf(stderr, "[%d/%d] %-20s %-24s %s\n", i+1, len(plan), cell.Recipe, cell.Fault, describeCell(cell))
		worst = models.Worse(worst, cell.Verdict)
		if err := writeMatrix(dir, names, setups, cells, o); err != nil {
			return exitError, err
		}
	}
	if o.jsonOut {
		doc, _ := os.ReadFile(filepath.Join(dir, "matrix.json"))
		stdout.Write(doc)
	} else {
		md, _ := os.ReadFile(filepath.Join(dir, "matrix.md"))
		stdout.Write(md)
		fmt.Fprintf(stdout, "\nmatrix: %s\n", dir)
	}
	return verdictCode(worst), nil
}

// matrixOnZooKeeper refuses a matrix on another service than ZooKeeper: its fault
// setups are ZooKeeper's (the matrix across services is not built yet).
func matrixOnZooKeeper(o runOptions, names []string) error {
	if o.service != "" {
		k, err := lockservice.ParseKind(o.service)
		if err != nil {
			return usageError{"--service: " + err.Error()}
		}
		if k != lockservice.KindZooKeeper {
			return fmt.Errorf("--service %s: not built yet, the matrix's faults are ZooKeeper's (docs/redis.md)", k)
		}
	}
	for _, n := range names {
		if k := harness.RecipeService(n); k != "" && k != lockservice.KindZooKeeper {
			return fmt.Errorf("recipe %s is a %s recipe: the matrix on %s is not built yet (docs/redis.md)", n, k, k)
		}
	}
	return nil
}

// serviceRecipes are the names whose recipe works with service k.
func serviceRecipes(names []string, k lockservice.Kind) []string {
	var out []string
	for _, n := range names {
		if harness.RecipeService(n) == k {
			out = append(out, n)
		}
	}
	return out
}

// pickSetups are the named setups --faults lists (all when empty).
func pickSetups(list string) ([]nemesis.Setup, error) {
	all := nemesis.Setups()
	if list == "" {
		return all, nil
	}
	var picked []nemesis.Setup
	for _, name := range splitList(list) {
		i := slices.IndexFunc(all, func(s nemesis.Setup) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown fault class %q (want some of %s)", name, setupNames(all))
		}
		picked = append(picked, all[i])
	}
	return picked, nil
}

// matrixRun is one planned cell: its recipe and setup, and its run's configuration.
type matrixRun struct {
	cell matrixCell
	cfg  harness.Config
}

// planMatrix is every cell's run, each checked (harness.Config.Prepare) before any
// runs.
func planMatrix(ctx context.Context, o runOptions, names []string, setups []nemesis.Setup, stderr io.Writer) ([]matrixRun, error) {
	var plan []matrixRun
	for _, name := range names {
		for _, s := range setups {
			po := o
			po.recipe, po.setup = name, &s
			po.cfg.Name = "matrix-" + name + "-" + s.Name
			cfg, err := po.plan(ctx, stderr)
			if err != nil {
				return nil, fmt.Errorf("recipe %s, faults %s: %w", name, s.Name, err)
			}
			plan = append(plan, matrixRun{cell: matrixCell{Recipe: name, Fault: s.Name, Seed: cfg.Seed}, cfg: cfg})
		}
	}
	return plan, nil
}

// runCell tests one cell of the matrix.
func runCell(ctx context.Context, p matrixRun) matrixCell {
	cell := p.cell
	t, err := harness.Test(ctx, p.cfg)
	res := t.Results
	cell.Verdict, cell.Ops, cell.Dir, cell.Herd = res.Verdict, res.Ops, res.Dir, res.Herd
	for _, c := range res.Checks {
		if c.Verdict == models.Invalid && (cell.FirstViolationSeconds == nil || (c.FirstViolationSeconds != nil && *c.FirstViolationSeconds < *cell.FirstViolationSeconds)) {
			cell.FirstViolationSeconds, cell.Witness = c.FirstViolationSeconds, c.Witness
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

// setupNames lists the setups' names.
func setupNames(setups []nemesis.Setup) string {
	var names []string
	for _, s := range setups {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func describeCell(c matrixCell) string {
	s := string(c.Verdict)
	if c.FirstViolationSeconds != nil {
		s += fmt.Sprintf(" at %.1fs", *c.FirstViolationSeconds)
	}
	s += fmt.Sprintf(" (%d ops)", c.Ops)
	if c.Error != "" {
		s += ": " + c.Error
	}
	return s
}

// herdCell is the herd column of recipe's row: the herd verdict and reads per grant
// of its run without faults, else of its first run that has a herd record.
func herdCell(recipe string, cells []matrixCell) string {
	var pick *herd.Report
	for _, c := range cells {
		if c.Recipe != recipe || c.Herd == nil {
			continue
		}
		if pick == nil || c.Fault == "none" {
			pick = c.Herd
		}
	}
	switch {
	case pick == nil:
		return ""
	case pick.Verdict == herd.NotExercised:
		return string(pick.Verdict)
	}
	return fmt.Sprintf("%s, %.1f reads/grant", pick.Verdict, pick.ReadsPerGrant)
}

// writeMatrix writes matrix.json and matrix.md with the cells so far.
func writeMatrix(dir string, recipes []string, classes []nemesis.Setup, cells []matrixCell, o runOptions) error {
	doc := map[string]any{
		"date": time.Now().UTC().Format(time.RFC3339), "time_per_run": o.cfg.Duration.String(),
		"nodes": o.cfg.Nodes, "workers": o.cfg.Workers, "session_timeout": o.cfg.SessionTimeout.String(),
		"fault_classes": classes, "cells": cells,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "matrix.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| recipe |")
	for _, c := range classes {
		fmt.Fprintf(&b, " %s |", c.Name)
	}
	b.WriteString(" herd |\n|---|")
	for range classes {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, r := range recipes {
		fmt.Fprintf(&b, "| %s |", r)
		for _, c := range classes {
			text := ""
			for _, cell := range cells {
				if cell.Recipe == r && cell.Fault == c.Name {
					text = string(cell.Verdict)
					if cell.FirstViolationSeconds != nil {
						text += fmt.Sprintf(" (%.0fs)", *cell.FirstViolationSeconds)
					}
					text += fmt.Sprintf(", %d ops", cell.Ops)
				}
			}
			fmt.Fprintf(&b, " %s |", text)
		}
		fmt.Fprintf(&b, " %s |\n", herdCell(r, cells))
	}
	fmt.Fprintf(&b, "\nEach cell: verdict (time from the start to the first violation), ops recorded; %s per run, %d servers, %d workers, session timeout %s.\n",
		o.cfg.Duration, o.cfg.Nodes, o.cfg.Workers, o.cfg.SessionTimeout)
	b.WriteString("herd: whether a release wakes every waiter (waiters watching the lock node's children, from the servers' watch tables) and the servers' reads per grant, from the recipe's run without faults (else its first run).\n")
	return os.WriteFile(filepath.Join(dir, "matrix.md"), []byte(b.String()), 0o644)
}
