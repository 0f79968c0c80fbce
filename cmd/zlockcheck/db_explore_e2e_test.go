package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/models"
)

// dbExploreSets are the database proof's recipes and budgets: in make test a short
// set (two mutants its first probe catches, each with a minute, and pg-advisory's
// control for 60 s: make test must stay under 30 minutes), run side by side; with ZLC_DB_MUTANTS=all (make mutants-db)
// every database mutant with the Redis proof's 4 minutes, every correct database
// recipe with 4 minutes, and pg-table, one after another.
func dbExploreSets(t *testing.T) (mutants, correct []string, mutantBudget, correctBudget string, parallel bool) {
	switch os.Getenv("ZLC_DB_MUTANTS") {
	case "":
		return []string{"mutant-pg-advisory-xact-lock", "mutant-mariadb-pool"}, []string{"pg-advisory"}, "1m", "60s", true
	case "all":
		return []string{"mutant-pg-advisory-xact-lock", "mutant-pg-advisory-pool", "mutant-pg-advisory-unlock-once",
				"mutant-pg-advisory-no-heartbeat", "mutant-mariadb-pool", "mutant-mariadb-unlock-once", "mutant-mariadb-no-heartbeat",
				"mutant-pg-table-delete-by-name", "mutant-pg-table-blind-retry", "mutant-pg-table-takeover-keeps-token", noExpiryTable},
			[]string{"pg-table-expiry", "pg-advisory", "mariadb-getlock"}, "4m", "4m", false
	}
	t.Fatalf("ZLC_DB_MUTANTS=%q: want all or nothing", os.Getenv("ZLC_DB_MUTANTS"))
	return nil, nil, "", "", false
}

// noExpiryTable is the articles' lock table as they describe it, without expiry: a
// holder that dies leaves its row, and the row blocks everyone for ever (the
// articles' own first objection). Explore must find that, as it finds any mutant,
// and say it: a recipe bug whose cause is the entry nobody removes.
const noExpiryTable = "pg-table"

// noExpiryWhy is what the cause of noExpiryTable's finding must say.
const noExpiryWhy = "nothing removes the entry of an owner that died"

// livenessWhy is the cause the final phase gave in a round's results.json ("" when
// it found none).
func livenessWhy(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Checks []struct {
			Key   string `json:"key"`
			Cause *struct {
				Why string `json:"why"`
			} `json:"cause"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	for _, c := range res.Checks {
		if c.Key == "liveness" && c.Cause != nil {
			return c.Cause.Why
		}
	}
	return ""
}

// TestExploreCatchesEveryDatabaseMutant: the Redis proof's one explore command line
// finds each database mutant invalid by its own bug (a recipe-bug overlap, or
// liveness: a lock nobody can take), not by an honest cause, within its budget; the
// correct database recipes under it show no recipe bug (each round valid, or
// invalid by an honest cause: a session the server ended, a failover).
func TestExploreCatchesEveryDatabaseMutant(t *testing.T) {
	requireDatabases(t)
	mutants, correct, mutantBudget, correctBudget, parallel := dbExploreSets(t)
	for _, recipe := range mutants {
		t.Run(recipe, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			s := runProofExplore(t, recipe, mutantBudget)
			last := s.Rounds[len(s.Rounds)-1]
			if s.Verdict != models.Invalid || last.Verdict != models.Invalid {
				t.Fatalf("%d rounds in %s: %s, want invalid: %+v", len(s.Rounds), s.Elapsed, s.Verdict, s.Rounds)
			}
			if last.Honest {
				t.Fatalf("round %d (%s): invalid only by %q, which a correct recipe shows too: %s", len(s.Rounds), last.Probe, last.Cause, last.Dir)
			}
			if why := livenessWhy(t, last.Dir); recipe == noExpiryTable && !strings.Contains(why, noExpiryWhy) {
				t.Fatalf("round %d (%s): %q, want the liveness cause %q: %s", len(s.Rounds), last.Probe, why, noExpiryWhy, last.Dir)
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
				if ok := r.Verdict == models.Valid || r.Verdict == models.Invalid && r.Honest; !ok {
					t.Errorf("round %d (%s, seed %d): %s %q: %s", i+1, r.Probe, r.Seed, r.Verdict, r.Cause, r.Dir)
				}
				t.Logf("round %d (%s): %s %s", i+1, r.Probe, r.Verdict, r.Cause)
			}
		})
	}
}
