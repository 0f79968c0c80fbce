package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// What a run asks of its lock service beyond lockservice.Service, each declared here
// where it is used. A service without one runs without the watch or record that needs
// it and says so in the run's log; it is never given a wrong number.

// rootMaker makes the root a run on a deployment it does not manage writes under
// (--connect's chroot), and returns how to remove it.
type rootMaker interface {
	PrepareRoot(ctx context.Context, sessionTimeout time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error)
}

// lockInspector reads the lock's entries and which sessions live: the liveness
// verdict and the orphan watch attribute each entry to a worker.
type lockInspector interface {
	OpenLock(ctx context.Context, sessionTimeout time.Duration) (lockservice.LockReader, error)
	LiveSessions(ctx context.Context) map[string]bool
}

// counterStore keeps the counter workload's shared value.
type counterStore interface {
	MakeCounter(ctx context.Context, sessionTimeout time.Duration, path string) error
	ReadCounter(ctx context.Context, sessionTimeout time.Duration, path string) (int64, error)
}

// herdSampler samples the servers' watches and counters for the herd verdict.
type herdSampler interface {
	HerdSample(ctx context.Context, at int64, lockPath string, logf func(string, ...any)) herd.Sample
}

// yardstick runs the plain client loop a run's overhead is measured against
// (--baseline, and its warm-up).
type yardstick interface {
	PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error)
}

// The service a run starts is its Config.Service; a recipe of the catalogue works
// with one kind of service, and a run refuses a recipe of another kind, and what the
// service cannot do yet, before it makes anything. What a kind is (its title, traits
// and abilities) is lockservice/kind's; what a run does with each kind's own
// settings is kinds.go's.

// RecipeService is the kind of service a recipe works with (its catalogue entry's
// Service: kind.Default when it names none), "" for a recipe not in the catalogue
// (exec: whatever the run says).
func RecipeService(name string) kind.Name {
	r, err := recipes.Find(name)
	if err != nil {
		return ""
	}
	return kind.Of(r.Service).Name
}

// RecipeSessionLock reports whether a recipe of the catalogue locks in the holder's
// server session (recipes.Entry.SessionLock).
func RecipeSessionLock(name string) bool {
	r, err := recipes.Find(name)
	return err == nil && r.SessionLock
}

// RecipeDoes reports whether a recipe of the catalogue does workload kind k (false
// for one not in the catalogue).
func RecipeDoes(name string, k workloads.Kind) bool {
	r, err := recipes.Find(name)
	return err == nil && r.Supports(k)
}

// findRecipe is the catalogue's entry of a recipe (false: not in the catalogue).
func findRecipe(name string) (recipes.Entry, bool) {
	r, err := recipes.Find(name)
	return r, err == nil
}

// serviceDefaults fills the service (the recipe's, else kind.Default), then that
// kind's own settings (kinds.go) and its number of servers.
func (c Config) serviceDefaults() Config {
	if c.Service == "" {
		c.Service = RecipeService(c.Recipe)
	}
	c.Service = kind.Of(c.Service).Name
	c = c.settingsDefaults()
	fill(&c.Nodes, kind.Of(c.Service).Nodes)
	return c
}

// serviceTitle is a kind of service as the messages name it.
func serviceTitle(k kind.Name) string { return k.Title() }

// validateService refuses a service the tool does not know, a recipe of another
// service, settings of another service, the fault classes the service cannot have,
// and what its own settings refuse (kinds.go).
func (c Config) validateService() error {
	k, ok := kind.Lookup(c.Service)
	if !ok {
		return fmt.Errorf("service: want %s, got %q", kind.Names(), c.Service)
	}
	if want := RecipeService(c.Recipe); want != "" && want != k.Name {
		return fmt.Errorf("recipe %s is a %s recipe: it cannot run with --service %s; run it with --service %s (the %s recipes: %s)",
			c.Recipe, serviceTitle(want), k.Name, want, k.Title, strings.Join(recipesOf(k.Name), ", "))
	}
	for _, cl := range c.Nemesis {
		if err := k.Refuse(cl.Needs()); err != nil {
			return fmt.Errorf("nemesis %s: %w", cl, err)
		}
		if n := cl.MinServers(); c.Nodes < n {
			return fmt.Errorf("nemesis %s: cuts servers off from each other: needs at least %d servers, the run has %d (--nodes)", cl, n, c.Nodes)
		}
	}
	return c.validateSettings()
}

// recipesOf lists the catalogue's recipes of a kind of service, mutants included.
func recipesOf(k kind.Name) []string {
	var out []string
	for _, r := range recipes.Catalog() {
		if kind.Of(r.Service).Name == k {
			out = append(out, r.Name)
		}
	}
	return out
}
