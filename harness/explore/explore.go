// Package explore owns `zlockcheck explore`: a time budget spent in short rounds, each
// an ordinary run (its own run directory, checked like any other), whose workload
// regimes and faults are chosen by what the earlier rounds have not exercised yet.
// The menu of round kinds (Probes), the feedback that picks the next one (Choose) and
// the session loop (Run) live here; running and checking one round is the caller's
// (Config.Round), so this package knows nothing of flags, recipes or reports.
package explore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// DefaultRound is how long one round's workload runs, unless the session says.
const DefaultRound = 20 * time.Second

// minRound is the shortest round worth starting when the budget runs out.
const minRound = 10 * time.Second

// Config is one exploring session.
type Config struct {
	// Base is every round's run before its probe is applied: recipe, worker command,
	// workload kind, ensemble, store and name; its Seed is the session's (round i runs
	// with Seed+i).
	Base harness.Config
	// Budget is the session's time: no round starts once it is spent, and a round
	// started near its end is shortened (down to ten seconds).
	Budget time.Duration
	// Round is each round's workload time (DefaultRound when zero).
	Round time.Duration
	// KeepGoing goes on after a round found a violation, to the budget's end.
	KeepGoing bool
	// Fixed are workload knobs set by hand: they replace the probes' draws.
	Fixed workloads.Fixed
	// Menu is the probes to choose from (Probes for the base's session timeout and
	// fencing when nil).
	Menu []Probe
	// RunRound runs and checks one round's configuration. An error (a round that could
	// not run, or broke down on the way: its workers would not start) ends the session;
	// a Round with a Dir is kept with it.
	RunRound func(ctx context.Context, cfg harness.Config) (Round, error)
	// Log receives a line per round (nil: none).
	Log io.Writer
}

// Round is one round's outcome, as RunRound reports it.
type Round struct {
	// Probe is the probe's name, Seed the round's seed (set by Run).
	Probe string `json:"probe"`
	Seed  int64  `json:"seed"`
	// Dir is the round's run directory.
	Dir string `json:"dir"`
	// Verdict is the round's verdict; Cause a violation's cause class, if known.
	Verdict models.Verdict `json:"verdict"`
	Cause   string         `json:"cause,omitempty"`
	// Coverage is what the round's history exercised.
	Coverage coverage.Table `json:"coverage"`
	// Elapsed is the round's wall time, set-up to check.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Session is what an exploring session did.
type Session struct {
	Rounds []Round `json:"rounds"`
	Tally  Tally   `json:"tally"`
	// Verdict is the worst round's (invalid over unknown over valid); a session with
	// no round is unknown.
	Verdict models.Verdict `json:"verdict"`
	Elapsed time.Duration  `json:"elapsed_ns"`
}

// Run spends the budget in rounds until it is spent, ctx is cancelled, or (without
// KeepGoing) a round is invalid. An error is a round that could not run (its set-up
// failed): the rounds before it are returned with it.
func Run(ctx context.Context, cfg Config) (Session, error) {
	if cfg.Budget <= 0 || cfg.RunRound == nil {
		return Session{}, errors.New("explore: want a budget > 0 and a round runner")
	}
	if cfg.Round <= 0 {
		cfg.Round = DefaultRound
	}
	menu := cfg.Menu
	if menu == nil {
		menu = Probes(cfg.Base.SessionTimeout, cfg.Base.Workload.Fenced)
	}
	start := time.Now()
	rng := rand.New(rand.NewPCG(uint64(cfg.Base.Seed), 0x6578706c))
	s := Session{Tally: NewTally(), Verdict: models.Unknown}
	for i := 0; ctx.Err() == nil; i++ {
		left := cfg.Budget - time.Since(start)
		if left < minRound {
			break
		}
		p := Choose(menu, s.Tally, rng)
		rc := roundConfig(cfg.Base, p, cfg.Fixed, int64(i), min(cfg.Round, left))
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "round %d: %s (seed %d, %s)\n", i+1, p.Name, rc.Seed, rc.Duration)
		}
		t := time.Now()
		r, err := cfg.RunRound(ctx, rc)
		r.Probe, r.Seed, r.Elapsed = p.Name, rc.Seed, time.Since(t)
		if err != nil {
			if r.Dir != "" {
				s.Rounds = append(s.Rounds, r)
			}
			s.Elapsed = time.Since(start)
			return s, fmt.Errorf("round %d (%s): %w", i+1, p.Name, err)
		}
		s.Rounds = append(s.Rounds, r)
		s.Tally.Add(p, r.Coverage)
		if len(s.Rounds) == 1 {
			s.Verdict = r.Verdict // an empty session is unknown; its first round says
		} else {
			s.Verdict = models.Worse(s.Verdict, r.Verdict)
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "round %d: %s in %s: %s\n", i+1, r.Verdict, r.Elapsed.Round(time.Second), r.Dir)
		}
		if r.Verdict == models.Invalid && !cfg.KeepGoing {
			break
		}
	}
	s.Elapsed = time.Since(start)
	return s, nil
}

// roundConfig is round i's run: the base with the probe's regimes (the fixed knobs in
// place), faults and targets, for d.
func roundConfig(base harness.Config, p Probe, fixed workloads.Fixed, i int64, d time.Duration) harness.Config {
	c := base
	c.Seed = base.Seed + i
	c.Duration = d
	c.EndOnOverlap = true
	c.Workload.Regimes = workloads.Fix(p.Regimes, fixed)
	c.Workload.RegimeLength = d / time.Duration(max(1, len(p.Regimes)))
	c.Workload.KeepAfterInfo = p.KeepWorkers
	c.Nemesis, c.ServerTargets, c.ClientTargets, c.Shapes = p.Faults, p.ServerTargets, p.ClientTargets, p.Shapes
	if p.Interval > 0 {
		c.NemesisInterval = p.Interval
	}
	return c
}
