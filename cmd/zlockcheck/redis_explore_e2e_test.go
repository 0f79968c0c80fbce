package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/harness/explore"
	"github.com/zlockcheck/zlockcheck/models"
)

// proofExploreArgs is the one explore command line of the Redis and database proofs,
// ZooKeeper's mutants' command: only --recipe (and, for a RedLock recipe, the
// topology it needs) differs between recipes, and nothing says where a bug is.
func proofExploreArgs(recipe, store, budget string) []string {
	args := []string{"explore", "--allow-mutants", "--recipe", recipe, "--budget", budget,
		"--seed", "1", "--store", store, "--quiet", "--json"}
	if recipe == "redsync" || strings.HasPrefix(recipe, "mutant-redlock-") {
		args = append(args, "--redis-topology", "redlock", "--nodes", "3")
	}
	return args
}

// redisExploreSets are the recipes of the proof and the correct recipes' budget: the
// short set in make test, run side by side (its control spends 60 s, not the mutants'
// 4 minutes: make test must stay under 30 minutes), every Redis mutant and correct
// recipe with ZLC_REDIS_MUTANTS=all (make mutants-redis), one after another.
func redisExploreSets(t *testing.T) (mutants, correct []string, correctBudget string, parallel bool) {
	switch os.Getenv("ZLC_REDIS_MUTANTS") {
	case "":
		return []string{"mutant-redis-no-expiry", "mutant-redlock-minority"}, []string{"redis-lock"}, "60s", true
	case "all":
		return []string{"mutant-redis-ignore-validity", "mutant-redlock-minority", "mutant-redis-setnx-then-expire",
				"mutant-redis-no-expiry", "mutant-redis-blind-del", "mutant-redis-static-value", "mutant-redlock-no-elapsed-check",
				"mutant-redis-extend-recreates"},
			[]string{"redis-lock", "redislock", "redsync"}, "4m", false
	}
	t.Fatalf("ZLC_REDIS_MUTANTS=%q: want all or nothing", os.Getenv("ZLC_REDIS_MUTANTS"))
	return nil, nil, "", false
}

// runProofExplore runs the proof's command line on recipe and reads its session.
// Its store is open to the database servers' users.
func runProofExplore(t *testing.T, recipe, budget string) explore.Session {
	t.Helper()
	store := keptIfFailed(t)
	code, stdout, stderr := zlockcheck(t, proofExploreArgs(recipe, store, budget)...)
	var s explore.Session
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("exit %d: %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	if len(s.Rounds) == 0 {
		t.Fatalf("exit %d: no round ran:\n%s", code, stderr)
	}
	assertNothingLeft(t, store)
	return s
}

// TestExploreCatchesEveryRedisMutant: the one explore command finds each Redis mutant
// invalid by its own bug (a recipe-bug overlap, or liveness: a key nobody can take),
// not by an honest cause, within its budget; the correct recipes under it show no
// recipe bug (a round is valid, or invalid by an honest cause).
func TestExploreCatchesEveryRedisMutant(t *testing.T) {
	requireIntegration(t)
	mutants, correct, correctBudget, parallel := redisExploreSets(t)
	for _, recipe := range mutants {
		t.Run(recipe, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			s := runProofExplore(t, recipe, "4m")
			last := s.Rounds[len(s.Rounds)-1]
			if s.Verdict != models.Invalid || last.Verdict != models.Invalid {
				t.Fatalf("%d rounds in %s: %s, want invalid: %+v", len(s.Rounds), s.Elapsed, s.Verdict, s.Rounds)
			}
			if last.Honest {
				t.Fatalf("round %d (%s): invalid only by %q, which a correct recipe shows too: %s", len(s.Rounds), last.Probe, last.Cause, last.Dir)
			}
			t.Logf("caught in round %d (%s, cause %q) after %s", len(s.Rounds), last.Probe, last.Cause, s.Elapsed.Round(time.Second))
		})
	}
	for _, recipe := range correct {
		t.Run(recipe, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			s := runProofExplore(t, recipe, correctBudget)
			for i, r := range s.Rounds {
				ok := r.Verdict == models.Valid || r.Verdict == models.Invalid && r.Honest
				if !ok {
					t.Errorf("round %d (%s, seed %d): %s %q: %s", i+1, r.Probe, r.Seed, r.Verdict, r.Cause, r.Dir)
				}
				t.Logf("round %d (%s): %s %s", i+1, r.Probe, r.Verdict, r.Cause)
			}
		})
	}
}
