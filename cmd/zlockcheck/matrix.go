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
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// matrixCell is one run of the matrix, or a cell whose setup its row's service or
// topology refuses ("n/a").
type matrixCell struct {
	Recipe  string         `json:"recipe"`
	Fault   string         `json:"fault"`
	Verdict models.Verdict `json:"verdict"`
	// Cause is the first violation's cause class (package cause), when known.
	Cause string `json:"cause,omitempty"`
	// Service, Topology and Nodes are the servers the cell ran on: the row's, or for a
	// Redis row another topology the setup needs (see planCell).
	Service  kind.Name `json:"service,omitempty"`
	Topology string    `json:"redis_topology,omitempty"`
	Nodes    int       `json:"nodes,omitempty"`
	// NotApplicable is why the setup cannot run on the row (the run's refusal), for an
	// "n/a" cell.
	NotApplicable string `json:"not_applicable,omitempty"`
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

// verdictNA is an n/a cell's verdict: its setup cannot run on its row's service or
// topology. It counts in no exit code.
const verdictNA models.Verdict = "n/a"

// matrixCmd runs every recipe (of any service) under every named fault setup
// (nemesis.Setups, and nemesis.NamedSetups when a row is a Redis or database recipe), one
// harness.Test each, writes matrix.json and matrix.md as it goes, and exits with the
// worst cell's verdict ("n/a" cells left out).
func matrixCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("matrix", stderr)
	var o runOptions
	o.register(fs)
	recipesF := fs.String("recipes", "", "comma-separated recipes of any service (default: every real recipe of --service, ZooKeeper's when it is not given)")
	faultsF := fs.String("faults", "", "comma-separated fault setups: "+setupNames(allSetups())+" (default: "+setupNames(nemesis.Setups())+", and the Redis ones when a recipe is Redis's)")
	out := fs.String("out", "", "directory for matrix.json and matrix.md (default STORE/matrix/<timestamp>)")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	o.noteSet(fs)
	o.quiet = true
	names, err := matrixRecipes(o, *recipesF)
	if err != nil {
		return exitError, err
	}
	setups, err := pickSetups(*faultsF, names)
	if err != nil {
		return exitError, fmt.Errorf("--faults: %w", err)
	}
	if err := o.sweep(ctx, stderr); err != nil {
		return exitError, err
	}
	rows, plan, err := planMatrix(ctx, o, names, setups, stderr)
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
	worst, err := runMatrix(ctx, dir, rows, setups, plan, o, stderr)
	if err != nil {
		return exitError, err
	}
	printMatrix(dir, o.jsonOut, stdout)
	return verdictCode(worst), nil
}

// runMatrix runs the plan's cells in order (an n/a cell is recorded, not run),
// rewriting matrix.json and matrix.md after each, and returns the worst verdict.
func runMatrix(ctx context.Context, dir string, rows []matrixRow, setups []nemesis.Setup, plan []matrixRun, o runOptions, stderr io.Writer) (models.Verdict, error) {
	runs := 0
	for _, p := range plan {
		if p.cell.Verdict != verdictNA {
			runs++
		}
	}
	fmt.Fprintf(stderr, "matrix: %d recipes × %d fault setups = %d runs of %s (%d n/a)\n", len(rows), len(setups), runs, o.cfg.Duration, len(plan)-runs)
	var cells []matrixCell
	worst := models.Valid
	for i, p := range plan {
		if ctx.Err() != nil {
			break
		}
		cell := p.cell
		if cell.Verdict != verdictNA {
			cell = runCell(ctx, p)
			worst = models.Worse(worst, cell.Verdict)
		}
		cells = append(cells, cell)
		fmt.Fprintf(stderr, "[%d/%d] %-20s %-24s %s\n", i+1, len(plan), cell.Recipe, cell.Fault, describeCell(cell))
		if err := writeMatrix(dir, rows, setups, cells, o); err != nil {
			return worst, err
		}
	}
	return worst, nil
}

// printMatrix prints matrix.json (--json) or matrix.md and where they are.
func printMatrix(dir string, jsonOut bool, stdout io.Writer) {
	if jsonOut {
		doc, _ := os.ReadFile(filepath.Join(dir, "matrix.json"))
		stdout.Write(doc)
		return
	}
	md, _ := os.ReadFile(filepath.Join(dir, "matrix.md"))
	stdout.Write(md)
	fmt.Fprintf(stdout, "\nmatrix: %s\n", dir)
}

// matrixRecipes are the matrix's rows: --recipes, else every real recipe of
// --service (ZooKeeper's when it is not given).
func matrixRecipes(o runOptions, list string) ([]string, error) {
	k := kind.Default
	if o.service != "" {
		var err error
		if k, err = kind.Parse(o.service); err != nil {
			return nil, usageError{"--service: " + err.Error()}
		}
	}
	if list != "" {
		return splitList(list), nil
	}
	return serviceRecipes(realRecipeNames(), k), nil
}

// serviceRecipes are the names whose recipe works with service k.
func serviceRecipes(names []string, k kind.Name) []string {
	var out []string
	for _, n := range names {
		if harness.RecipeService(n) == k {
			out = append(out, n)
		}
	}
	return out
}

// allSetups are every named setup --faults can pick: nemesis.Setups, then
// nemesis.NamedSetups.
func allSetups() []nemesis.Setup { return append(nemesis.Setups(), nemesis.NamedSetups()...) }

// pickSetups are the named setups --faults lists; when empty, nemesis.Setups (a
// ZooKeeper-only matrix's columns, as ever), and nemesis.NamedSetups too when one of
// the recipes is Redis's or a database's.
func pickSetups(list string, recipes []string) ([]nemesis.Setup, error) {
	all := allSetups()
	if list == "" {
		if slices.ContainsFunc(recipes, func(n string) bool {
			s := harness.RecipeService(n)
			return s != "" && !s.Is(kind.Default)
		}) {
			return all, nil
		}
		return nemesis.Setups(), nil
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

// matrixRun is one planned cell: its recipe and setup, and its run's configuration
// (none for an n/a cell).
type matrixRun struct {
	cell matrixCell
	cfg  harness.Config
}

// runCell tests one cell of the matrix.
func runCell(ctx context.Context, p matrixRun) matrixCell {
	cell := p.cell
	t, err := harness.Test(ctx, p.cfg)
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
	if c.Verdict == verdictNA {
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
func writeMatrix(dir string, rows []matrixRow, classes []nemesis.Setup, cells []matrixCell, o runOptions) error {
	doc := map[string]any{
		"date": time.Now().UTC().Format(time.RFC3339), "time_per_run": o.cfg.Duration.String(),
		"nodes": o.cfg.Nodes, "workers": o.cfg.Workers, "session_timeout": o.cfg.SessionTimeout.String(),
		"rows": rows, "fault_classes": classes, "cells": cells,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "matrix.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "matrix.md"), []byte(matrixTable(rows, classes, cells, o)), 0o644)
}

// matrixTable is matrix.md: a row per recipe, a column per setup, then the herd
// column, and what a cell says.
func matrixTable(rows []matrixRow, classes []nemesis.Setup, cells []matrixCell, o runOptions) string {
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
	others := false
	for _, r := range rows {
		others = others || !r.Service.Is(kind.Default)
		fmt.Fprintf(&b, "| %s |", r.label())
		for _, c := range classes {
			text := ""
			if i := slices.IndexFunc(cells, func(cell matrixCell) bool { return cell.Recipe == r.Recipe && cell.Fault == c.Name }); i >= 0 {
				text = cellText(r, cells[i])
			}
			fmt.Fprintf(&b, " %s |", text)
		}
		fmt.Fprintf(&b, " %s |\n", herdCell(r.Recipe, cells))
	}
	servers := fmt.Sprintf("%d servers", o.cfg.Nodes)
	if others {
		servers = fmt.Sprintf("%d ZooKeeper servers, other services' servers as each row says", o.cfg.Nodes)
	}
	fmt.Fprintf(&b, "\nEach cell: verdict (time from the start to the first violation, its cause class), ops recorded; %s per run, %s, %d workers, session timeout %s.\n",
		o.cfg.Duration, servers, o.cfg.Workers, o.cfg.SessionTimeout)
	if slices.ContainsFunc(cells, func(c matrixCell) bool { return c.Verdict == verdictNA }) {
		b.WriteString("n/a: the setup's faults cannot run on the row's service or topology (matrix.json says why); not run, not in the exit code.\n")
	}
	if slices.ContainsFunc(rows, func(r matrixRow) bool { return r.Topology != "" }) {
		b.WriteString("\"on T ×N\": the cell ran on another Redis topology than its row's, the one its faults need.\n")
	}
	b.WriteString("herd: whether a release wakes every waiter (waiters watching the lock node's children, from the servers' watch tables) and the servers' reads per grant, from the recipe's run without faults (else its first run).\n")
	return b.String()
}

// cellText is one cell of matrix.md: "n/a", or the verdict, the first violation's
// time and cause class, the ops, and the topology when it is not the row's.
func cellText(r matrixRow, cell matrixCell) string {
	if cell.Verdict == verdictNA {
		return string(verdictNA)
	}
	text := string(cell.Verdict)
	switch {
	case cell.FirstViolationSeconds != nil && cell.Cause != "":
		text += fmt.Sprintf(" (%.0fs, %s)", *cell.FirstViolationSeconds, cell.Cause)
	case cell.FirstViolationSeconds != nil:
		text += fmt.Sprintf(" (%.0fs)", *cell.FirstViolationSeconds)
	}
	text += fmt.Sprintf(", %d ops", cell.Ops)
	if cell.Topology != r.Topology || cell.Nodes != r.Nodes {
		text += fmt.Sprintf(", on %s ×%d", cell.Topology, cell.Nodes)
	}
	return text
}
