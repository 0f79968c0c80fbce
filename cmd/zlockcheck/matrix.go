package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/harness/matrix"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// matrixCmd runs every recipe (of any service) under every named fault setup
// (nemesis.Setups, and nemesis.NamedSetups when a row is a Redis or database recipe), one
// harness.Test each, writes matrix.json and matrix.md as it goes, and exits with the
// worst cell's verdict ("n/a" cells left out).
func matrixCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("matrix", stderr)
	var o runOptions
	o.register(fs)
	recipesF := fs.String("recipes", "", "comma-separated recipes of any service (default: every real recipe of --service, ZooKeeper's when it is not given)")
	faultsF := fs.String("faults", "", "comma-separated fault setups: "+matrix.SetupNames(matrix.AllSetups())+" (default: "+matrix.SetupNames(nemesis.Setups())+", and the Redis ones when a recipe is Redis's)")
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
	o.setup = &nemesis.Setup{Name: "none"} // each cell's is its column's (matrix.New)
	o.manyKinds = true                     // each row's settings are its kind's (matrix.New)
	base, err := o.config(stderr)
	if err != nil {
		return exitError, err
	}
	given, err := o.kinds.given(o.set)
	if err != nil {
		return exitError, err
	}
	plan, err := matrix.New(ctx, base, names, setups, given...)
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
	worst, err := plan.Run(ctx, dir, stderr)
	if err != nil {
		return exitError, err
	}
	printMatrix(dir, o.jsonOut, stdout)
	return verdictCode(worst), nil
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
// --service (the default kind's when it is not given).
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
	return matrix.RecipesOf(k), nil
}

// pickSetups are the named setups --faults lists; when empty, the matrix's
// default for these recipes (matrix.DefaultSetups).
func pickSetups(list string, recipes []string) ([]nemesis.Setup, error) {
	if list == "" {
		return matrix.DefaultSetups(recipes), nil
	}
	all := matrix.AllSetups()
	var picked []nemesis.Setup
	for _, name := range splitList(list) {
		i := slices.IndexFunc(all, func(s nemesis.Setup) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown fault class %q (want some of %s)", name, matrix.SetupNames(all))
		}
		picked = append(picked, all[i])
	}
	return picked, nil
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
