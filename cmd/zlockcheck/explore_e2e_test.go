package main

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/zlockcheck/zlockcheck/harness/explore"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
)

// knownFindings are the real bugs explore finds in real recipes, by the probe that
// finds them: true positives, not alarms (docs/explore.md). With workers kept after
// an unknown outcome, a lock node whose create reply was lost stays under the live
// session and deadlocks the lock: go-zookeeper's orphan.
func knownFindings() map[string][]string {
	return map[string][]string{"gozk": {"replies lost"}}
}

// keptIfFailed is a store for t's runs, removed at its end unless t failed: a
// failing round's directory is then there to look at.
func keptIfFailed(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "zlc-test-store-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // a database server's user (postgres) enters it
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept the store for a look: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// TestExploreFindsNoRecipeBugInRealRecipes is explore's control (make explore, with
// ZLC_EXPLORE=1; minutes per recipe): the same command that catches every mutant,
// spent on correct recipes, must not report a recipe bug. An overlap whose cause
// class is the ensemble's configuration (a follower serving a session the leader
// expired) or an unfenced one is the truth about the run, not a false alarm; any
// other invalid or unknown round fails the test.
func TestExploreFindsNoRecipeBugInRealRecipes(t *testing.T) {
	if os.Getenv("ZLC_EXPLORE") == "" {
		t.Skip("explore's control is long: make explore (ZLC_EXPLORE=1)")
	}
	requireIntegration(t)
	budget := os.Getenv("ZLC_EXPLORE_BUDGET")
	if budget == "" {
		budget = "5m"
	}
	for _, recipe := range []string{"zlc-mutex", "curator-mutex", "kazoo-lock"} {
		t.Run(recipe, func(t *testing.T) {
			store := keptIfFailed(t)
			code, stdout, stderr := zlockcheck(t, "explore", "--recipe", recipe, "--budget", budget, "--seed", "1",
				"--store", store, "--quiet", "--json", "--keep-going")
			var s explore.Session
			if err := json.Unmarshal([]byte(stdout), &s); err != nil {
				t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
			}
			for i, r := range s.Rounds {
				honest := r.Cause == string(cause.Configuration) || r.Cause == string(cause.Unfenced)
				known := r.Verdict == models.Invalid && slices.Contains(knownFindings()[recipe], r.Probe)
				switch {
				case known:
					t.Logf("round %d (%s, seed %d): invalid, a known true positive (see knownFindings): %s", i+1, r.Probe, r.Seed, r.Dir)
				case r.Verdict != models.Valid && !(r.Verdict == models.Invalid && honest):
					t.Errorf("round %d (%s, seed %d): %s %s: %s", i+1, r.Probe, r.Seed, r.Verdict, r.Cause, r.Dir)
				}
			}
			t.Logf("%d rounds in %s: %s\n%s", len(s.Rounds), s.Elapsed, s.Verdict, stderr)
			if len(s.Rounds) == 0 {
				t.Fatalf("no round ran:\n%s", stderr)
			}
		})
	}
}
