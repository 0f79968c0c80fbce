package matrix

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Write writes matrix.json and matrix.md in dir with the cells so far.
func (p Plan) Write(dir string, cells []Cell) error {
	d := p.Base.Defaults()
	doc := map[string]any{
		"date": time.Now().UTC().Format(time.RFC3339), "time_per_run": d.Duration.String(),
		"nodes": d.Nodes, "workers": d.Workers, "session_timeout": d.SessionTimeout.String(),
		"rows": p.Rows, "fault_classes": p.Setups, "cells": cells,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "matrix.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "matrix.md"), []byte(p.Table(cells)), 0o644)
}

// Table is matrix.md: a row per recipe, a column per setup, then the herd column,
// and what a cell says.
func (p Plan) Table(cells []Cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| recipe |")
	for _, c := range p.Setups {
		fmt.Fprintf(&b, " %s |", c.Name)
	}
	b.WriteString(" herd |\n|---|")
	for range p.Setups {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	others := false
	for _, r := range p.Rows {
		others = others || r.Label() != r.Recipe
		fmt.Fprintf(&b, "| %s |", r.Label())
		for _, c := range p.Setups {
			text := ""
			if i := slices.IndexFunc(cells, func(cell Cell) bool { return cell.Recipe == r.Recipe && cell.Fault == c.Name }); i >= 0 {
				text = cellText(r, cells[i])
			}
			fmt.Fprintf(&b, " %s |", text)
		}
		fmt.Fprintf(&b, " %s |\n", herdCell(r.Recipe, cells))
	}
	d := p.Base.Defaults()
	servers := fmt.Sprintf("%d servers", d.Nodes)
	if others {
		servers = fmt.Sprintf("%d %s servers, other services' servers as each row says", d.Nodes, d.Service.Title())
	}
	fmt.Fprintf(&b, "\nEach cell: verdict (time from the start to the first violation, its cause class), ops recorded; %s per run, %s, %d workers, session timeout %s.\n",
		d.Duration, servers, d.Workers, d.SessionTimeout)
	if slices.ContainsFunc(cells, func(c Cell) bool { return c.Verdict == NA }) {
		b.WriteString("n/a: the setup's faults cannot run on the row's service or topology (matrix.json says why); not run, not in the exit code.\n")
	}
	if slices.ContainsFunc(p.Rows, func(r Row) bool { return r.Topology != "" }) {
		b.WriteString("\"on T ×N\": the cell ran on another Redis topology than its row's, the one its faults need.\n")
	}
	b.WriteString("herd: whether a release wakes every waiter (waiters watching the lock node's children, from the servers' watch tables) and the servers' reads per grant, from the recipe's run without faults (else its first run).\n")
	return b.String()
}

// cellText is one cell of matrix.md: "n/a", or the verdict, the first violation's
// time and cause class, the ops, and the topology when it is not the row's.
func cellText(r Row, cell Cell) string {
	if cell.Verdict == NA {
		return string(NA)
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

// herdCell is the herd column of recipe's row: the herd verdict and reads per grant
// of its run without faults, else of its first run that has a herd record.
func herdCell(recipe string, cells []Cell) string {
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

// SetupNames lists the setups' names, comma-separated.
func SetupNames(setups []nemesis.Setup) string {
	var names []string
	for _, s := range setups {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}
