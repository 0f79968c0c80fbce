package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// recipe is one lock implementation the harness can test: how to start its worker
// and which workloads it speaks.
type recipe struct {
	name        string
	description string
	mutant      bool
	kinds       []workloads.Kind
	// argv is the worker command line, given the zlockcheck binary and the project
	// root (which holds recipes/ and build/).
	argv func(self, root string) []string
	// prepare builds what the worker needs (the Java classes), if missing.
	prepare func(ctx context.Context, root string, log io.Writer) error
}

// catalogue lists every recipe: the Go ones served by `zlockcheck worker`, the Curator
// worker (Java, Debian's libcurator-recipes-java) and the Kazoo worker (Python,
// Debian's python3-kazoo).
func catalogue() []recipe {
	var list []recipe
	for _, name := range recipes.Names() {
		kinds := []workloads.Kind{workloads.Mutex, workloads.Counter}
		list = append(list, recipe{name: name, description: recipes.Describe(name), mutant: recipes.IsMutant(name), kinds: kinds,
			argv: func(self, _ string) []string { return []string{self, "worker", "--recipe", name} }})
	}
	curator := []struct {
		name, what string
		kinds      []workloads.Kind
	}{
		{"curator-mutex", "Curator's InterProcessMutex; SUSPENDED or LOST while holding reports lost", []workloads.Kind{workloads.Mutex, workloads.Counter}},
		{"curator-semaphore", "Curator's InterProcessSemaphoreV2 (leases)", []workloads.Kind{workloads.Semaphore}},
		{"curator-rwlock", "Curator's InterProcessReadWriteLock", []workloads.Kind{workloads.RWLock}},
		{"curator-reentrant", "Curator's InterProcessMutex acquired twice, released twice", []workloads.Kind{workloads.Reentrant, workloads.Mutex}},
	}
	for _, c := range curator {
		list = append(list, recipe{name: c.name, description: c.what, kinds: c.kinds,
			argv: func(_, root string) []string {
				return []string{filepath.Join(root, "recipes/curator/run.sh"), filepath.Join(root, "build/curator"), c.name}
			},
			prepare: prepareCurator})
	}
	kazoo := []struct {
		name, what string
		kinds      []workloads.Kind
	}{
		{"kazoo-lock", "Kazoo's Lock; SUSPENDED or LOST while holding reports lost", []workloads.Kind{workloads.Mutex, workloads.Counter}},
		{"kazoo-semaphore", "Kazoo's Semaphore", []workloads.Kind{workloads.Semaphore}},
		{"kazoo-rwlock", "Kazoo's ReadLock / WriteLock", []workloads.Kind{workloads.RWLock}},
	}
	for _, k := range kazoo {
		list = append(list, recipe{name: k.name, description: k.what, kinds: k.kinds,
			argv: func(_, root string) []string {
				return []string{"/usr/bin/python3", filepath.Join(root, "recipes/kazoo/kazoo_worker.py"), k.name}
			}})
	}
	slices.SortStableFunc(list, func(a, b recipe) int {
		if a.mutant != b.mutant {
			if a.mutant {
				return 1
			}
			return -1
		}
		return strings.Compare(a.name, b.name)
	})
	return list
}

func findRecipe(name string) (recipe, error) {
	var names []string
	for _, r := range catalogue() {
		if r.name == name {
			return r, nil
		}
		if !r.mutant {
			names = append(names, r.name)
		}
	}
	return recipe{}, fmt.Errorf("unknown recipe %q (want exec or one of %s; `zlockcheck recipes` lists them)", name, strings.Join(names, ", "))
}

// projectRoot finds the directory holding recipes/ (the Curator and Kazoo workers):
// $ZLC_HOME, else the parent of the binary's directory (bin/zlockcheck), else the
// current directory.
func projectRoot() string {
	candidates := []string{os.Getenv("ZLC_HOME")}
	if self, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Dir(filepath.Dir(self)))
	}
	if wd, err := os.Getwd(); err == nil {
		candidates = append(candidates, wd)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, "recipes", "kazoo", "kazoo_worker.py")); err == nil {
			return c
		}
	}
	return "."
}

// prepareCurator compiles the Curator worker unless its class is newer than its source.
func prepareCurator(ctx context.Context, root string, log io.Writer) error {
	src := filepath.Join(root, "recipes/curator/ZlcCuratorWorker.java")
	class := filepath.Join(root, "build/curator/ZlcCuratorWorker.class")
	si, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("curator worker source: %w (set ZLC_HOME to the zlockcheck checkout)", err)
	}
	if ci, err := os.Stat(class); err == nil && ci.ModTime().After(si.ModTime()) {
		return nil
	}
	fmt.Fprintln(log, "compiling the Curator worker")
	cmd := exec.CommandContext(ctx, filepath.Join(root, "recipes/curator/build.sh"), filepath.Join(root, "build/curator"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("compile the Curator worker (needs javac and libcurator-recipes-java: make setup): %w\n%s", err, out)
	}
	return nil
}

func recipesCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("recipes", stderr)
	all := fs.Bool("allow-mutants", false, "also list the deliberately broken mutants")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	for _, r := range catalogue() {
		if r.mutant && !*all {
			continue
		}
		var kinds []string
		for _, k := range r.kinds {
			kinds = append(kinds, string(k))
		}
		fmt.Fprintf(stdout, "%-28s %-26s %s\n", r.name, strings.Join(kinds, ","), r.description)
	}
	fmt.Fprintf(stdout, "%-28s %-26s %s\n", "exec", "any", "your own worker: --worker-cmd \"CMD ARGS\" speaking protocol v1")
	return 0, nil
}

// recipeVersion names the library a recipe tests and its installed version, for
// results.json: the Debian package's version for Curator and Kazoo, the module's for
// go-zookeeper, the tool's own for zlc-mutex and its mutants; "" when unknown.
func recipeVersion(name string) string {
	deb := func(label, pkg string) string {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
		if err != nil || len(out) == 0 {
			return ""
		}
		return label + " " + string(out) + " (Debian " + pkg + ")"
	}
	module := func(label, path string) string {
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return ""
		}
		if path == "" {
			return label + " " + bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == path {
				return label + " " + d.Version
			}
		}
		return ""
	}
	switch {
	case strings.HasPrefix(name, "curator-"):
		return deb("Curator", "libcurator-recipes-java")
	case strings.HasPrefix(name, "kazoo-"):
		return deb("Kazoo", "python3-kazoo")
	case name == "gozk":
		return module("go-zookeeper", "github.com/go-zookeeper/zk")
	case name == "zlc-mutex" || strings.HasPrefix(name, "mutant-"):
		return module("zlockcheck", "")
	}
	return ""
}
