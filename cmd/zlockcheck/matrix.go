package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// faultClass is one column of the safety matrix: a name and the nemesis options it
// stands for.
type faultClass struct {
	Name    string `json:"name"`
	Nemesis string `json:"nemesis"`
	Targets string `json:"targets,omitempty"`
	Shapes  string `json:"shapes,omitempty"`
}

// matrixClasses are the matrix's fault classes, by name.
func matrixClasses() []faultClass {
	return []faultClass{
		{Name: "none", Nemesis: "none"},
		{Name: "server", Nemesis: "kill,pause,partition"},
		{Name: "client-partition", Nemesis: "client-partition", Targets: "holder"},
		{Name: "session-expire", Nemesis: "session-expire", Targets: "holder"},
		{Name: "client-pause", Nemesis: "client-pause", Targets: "holder"},
		{Name: "isolate-follower-quorum", Nemesis: "partition", Shapes: "isolate-follower-quorum"},
	}
}

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

func matrixCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("matrix", stderr)
	var o runOptions
	o.register(fs)
	recipesF := fs.String("recipes", "", "comma-separated recipes (default: every real recipe)")
	faultsF := fs.String("faults", "", "comma-separated fault classes (default: all of "+classNames()+")")
	out := fs.String("out", "", "directory for matrix.json and matrix.md (default STORE/matrix/<timestamp>)")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	o.quiet = true
	var names []string
	if *recipesF == "" {
		names = realRecipeNames()
	} else {
		names = splitList(*recipesF)
	}
	classes := matrixClasses()
	if *faultsF != "" {
		var picked []faultClass
		for _, name := range splitList(*faultsF) {
			found := false
			for _, c := range classes {
				if c.Name == name {
					picked, found = append(picked, c), true
				}
			}
			if !found {
				return exitError, fmt.Errorf("--faults: unknown fault class %q (want some of %s)", name, classNames())
			}
		}
		classes = picked
	}
	// Check every cell's configuration before running any.
	type planned struct {
		cell matrixCell
		opts runOptions
	}
	var plan []planned
	for _, name := range names {
		for _, c := range classes {
			po := o
			po.recipe, po.nemesis, po.targets, po.shapes = name, c.Nemesis, c.Targets, c.Shapes
			po.cfg.Name = "matrix-" + name + "-" + c.Name
			if _, _, err := po.plan(ctx, stderr); err != nil {
				return exitError, fmt.Errorf("recipe %s, faults %s: %w", name, c.Name, err)
			}
			plan = append(plan, planned{cell: matrixCell{Recipe: name, Fault: c.Name}, opts: po})
		}
	}
	dir := *out
	if dir == "" {
		dir = rundir.MatrixDir(o.cfg.Store, time.Now())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return exitError, err
	}
	fmt.Fprintf(stderr, "matrix: %d recipes × %d fault classes = %d runs of %s\n", len(names), len(classes), len(plan), o.cfg.Duration)
	var cells []matrixCell
	worst := models.Valid
	for i, p := range plan {
		if ctx.Err() != nil {
			break
		}
		cfg, modelCfg, err := p.opts.plan(ctx, stderr)
		cell := p.cell
		cell.Seed = cfg.Seed
		if err == nil {
			var res report.Results
			res, err = execute(ctx, cfg, modelCfg, io.Discard)
			cell.Verdict, cell.Ops, cell.Dir, cell.Herd = res.Verdict, res.Ops, res.Dir, res.Herd
			for _, c := range res.Checks {
				if c.Verdict == models.Invalid && (cell.FirstViolationSeconds == nil || (c.FirstViolationSeconds != nil && *c.FirstViolationSeconds < *cell.FirstViolationSeconds)) {
					cell.FirstViolationSeconds, cell.Witness = c.FirstViolationSeconds, c.Witness
				}
			}
		}
		if err != nil {
			cell.Error = err.Error()
			if cell.Verdict == "" || cell.Verdict == models.Valid {
				cell.Verdict = "error"
			}
		}
		cells = append(cells, cell)
		fmt.Fprintf(stderr, "[%d/%d] %-20s %-24s %s\n", i+1, len(plan), cell.Recipe, cell.Fault, describeCell(cell))
		switch cell.Verdict {
		case models.Invalid:
			worst = models.Invalid
		case models.Unknown, "error":
			if worst == models.Valid {
				worst = models.Unknown
			}
		}
		if err := writeMatrix(dir, names, classes, cells, o); err != nil {
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

func classNames() string {
	var names []string
	for _, c := range matrixClasses() {
		names = append(names, c.Name)
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
func writeMatrix(dir string, recipes []string, classes []faultClass, cells []matrixCell, o runOptions) error {
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
