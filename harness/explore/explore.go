// Package explore owns `zlockcheck explore`: a time budget spent in short rounds, each
// an ordinary test (harness.Test: its own run directory, checked and kept like any
// other), whose workload regimes and faults are chosen by what the earlier rounds have
// not exercised yet. The menu of round kinds (Probes), the feedback that picks the
// next one (Choose) and the session (Run: one ensemble for every round, the loop, the
// session's directory and session.json) live here; flags and printing are the CLI's.
package explore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/rundir"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// DefaultRound is how long one round's workload runs, unless the session says.
const DefaultRound = 20 * time.Second

// DefaultFirstRound is how long a round of the first pass through the menu runs:
// most findings come in a round's first seconds, or in the final phase after it
// (an orphan, a zombie holder's overlap: they outlive the workload), so a short first
// look at every probe reaches the first finding sooner; later rounds, sent by the
// feedback, run the full Round.
const DefaultFirstRound = 8 * time.Second

// minRound is the shortest round worth starting when the budget runs out (a
// first-pass round may be shorter: it is one by design).
const minRound = 10 * time.Second

// Config is one exploring session.
type Config struct {
	// Base is every round's run before its probe is applied: recipe, workload kind,
	// ensemble, store, name and keep policy; its Seed is the session's (0: drawn; round
	// i runs with Seed+i). Run completes it once (harness.Config.Prepare); a
	// SessionTimeout of 0 is explore's to choose: LeaseTTL on a kind whose session is
	// a lease its recipe keeps, the harness's default otherwise.
	Base harness.Config
	// Budget is the session's time: no round starts once it is spent, and a round
	// started near its end is shortened (down to ten seconds).
	Budget time.Duration
	// Round is each round's workload time (DefaultRound when zero).
	Round time.Duration
	// FirstRound is the workload time of the first pass's rounds, one per probe of the
	// menu (never longer than Round), or a probe's FirstLook when longer (a probe that
	// needs a long look says so; the budget's end still shortens it). Zero: Run takes
	// the service's (firstRound), the loop alone the full Round.
	FirstRound time.Duration
	// KeepGoing goes on after a round found a violation, to the budget's end.
	KeepGoing bool
	// Fixed are workload knobs set by hand: they replace the probes' draws.
	Fixed workloads.Fixed
	// Menu is the probes to choose from (nil: Run takes Menu of the prepared base, the
	// service's probes it can run).
	Menu []Probe
	// Log receives a line per round (nil: none).
	Log io.Writer
	// Warn receives what does not end the session: why a round's run broke down when
	// its history was checked anyway, an ensemble that would not stop (nil: none).
	Warn io.Writer
}

// Round is one round's outcome.
type Round struct {
	// Probe is the probe's name, Seed the round's seed.
	Probe string `json:"probe"`
	Seed  int64  `json:"seed"`
	// Dir is the round's run directory.
	Dir string `json:"dir"`
	// Honest says every violation of an invalid round has an honest cause class
	// (cause.Class.Honest: the truth about the service, not a recipe bug): the
	// session goes on after such a round.
	Honest bool `json:"honest,omitempty"`
	// Verdict is the round's verdict; Cause a violation's cause class, if known.
	Verdict models.Verdict `json:"verdict"`
	Cause   string         `json:"cause,omitempty"`
	// Coverage is what the round's history exercised; AimLanded says it reached
	// one of its probe's aims (Probe.Aims) that apply to the service.
	Coverage  coverage.Table `json:"coverage"`
	AimLanded bool           `json:"aim_landed"`
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
	// Dir is the session's directory (rundir.ExploreDir): session.json, and the
	// servers' files of its ensemble; "" when the session never started.
	Dir string `json:"-"`
}

// base is the session's base configuration: a kind whose session timeout is a lease
// its recipe keeps (kind.Kind.Lease) gets LeaseTTL when the base gives none.
func (cfg Config) base() harness.Config {
	b := cfg.Base
	if b.SessionTimeout == 0 && kind.Of(b.Defaults().Service).Lease {
		b.SessionTimeout = LeaseTTL
	}
	return b
}

// Run is one session: it completes the base, starts one ensemble for every round
// (harness.StartSite), spends the budget in rounds (each a harness.Test on that
// ensemble) until it is spent, ctx is cancelled, or (without KeepGoing) a round is
// invalid by more than an honest cause (Round.Honest: an honest finding is kept and
// the session goes on, so it cannot hide a recipe bug), writes session.json into the session's directory and stops the ensemble.
// An error is a base that cannot run, an ensemble that would not start (the session
// has no Dir then), or a round that could not run or broke down: the rounds before it
// are returned with it.
func Run(ctx context.Context, cfg Config) (Session, error) {
	if cfg.Budget <= 0 {
		return Session{}, errors.New("explore: want a budget > 0")
	}
	base, err := cfg.base().Prepare(ctx)
	if err != nil {
		return Session{}, err
	}
	base.StallAfter = cfg.Base.StallAfter // derived from each round's faults, not the base's
	if cfg.Menu == nil {
		cfg.Menu = Menu(base)
	}
	if cfg.FirstRound == 0 {
		cfg.FirstRound = menuOf(base.Service).firstRound
	}
	if len(cfg.Menu) == 0 {
		return Session{}, fmt.Errorf("explore: no probe of the %s menu can run with this configuration", base.Service)
	}
	dir := rundir.ExploreDir(base.Store, time.Now())
	site, err := harness.StartSite(ctx, base, filepath.Join(dir, rundir.Servers))
	if err != nil {
		return Session{}, err
	}
	defer func() {
		if cerr := site.Close(); cerr != nil && cfg.Warn != nil {
			fmt.Fprintf(cfg.Warn, "zlockcheck explore: removing the ensemble: %v\n", cerr)
		}
	}()
	base.Site = site
	s, err := cfg.loop(ctx, base, func(ctx context.Context, rc harness.Config) (Round, error) {
		return runRound(ctx, rc, cfg.Warn)
	})
	s.Dir = dir
	if werr := rundir.Dir(dir).WriteJSON(rundir.Session, s); werr != nil && err == nil {
		err = werr
	}
	return s, err
}

// roundFunc runs and checks one round's configuration. An error (a round that could
// not run, or broke down on the way: its workers would not start) ends the session; a
// Round with a Dir is kept with it.
type roundFunc func(ctx context.Context, cfg harness.Config) (Round, error)

// loop is the session's rounds on base, each run by run.
func (cfg Config) loop(ctx context.Context, base harness.Config, run roundFunc) (Session, error) {
	if cfg.Round <= 0 {
		cfg.Round = DefaultRound
	}
	menu := cfg.Menu
	if menu == nil {
		menu = menuOf(base.Service).probes(base)
	}
	start := time.Now()
	rng := rand.New(rand.NewPCG(uint64(base.Seed), 0x6578706c))
	s := Session{Tally: NewTally(), Verdict: models.Unknown}
	for i := 0; ctx.Err() == nil; i++ {
		left := cfg.Budget - time.Since(start)
		p := Choose(menu, s.Tally, rng)
		length := max(cfg.Round, p.FirstLook)
		if i < len(menu) && cfg.FirstRound > 0 {
			length = max(min(cfg.Round, cfg.FirstRound), p.FirstLook)
		}
		if left < min(length, minRound) {
			break
		}
		rc := roundConfig(base, p, cfg.Fixed, int64(i), min(length, left))
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "round %d: %s (seed %d, %s)\n", i+1, p.Name, rc.Seed, rc.Duration)
		}
		t := time.Now()
		r, err := run(ctx, rc)
		r.Probe, r.Seed, r.Elapsed = p.Name, rc.Seed, time.Since(t)
		r.AimLanded = aimLanded(p, r.Coverage)
		if err != nil {
			if r.Dir != "" {
				s.Rounds = append(s.Rounds, r)
			}
			s.Elapsed = time.Since(start)
			return s, fmt.Errorf("round %d (%s): %w", i+1, p.Name, err)
		}
		s.add(p, r)
		if cfg.Log != nil {
			missed := ""
			if !r.AimLanded {
				missed = " (its aim did not land: another look comes soon)"
			}
			fmt.Fprintf(cfg.Log, "round %d: %s in %s: %s%s\n", i+1, r.Verdict, r.Elapsed.Round(time.Second), r.Dir, missed)
		}
		if r.Verdict == models.Invalid && !cfg.KeepGoing && !r.Honest {
			break
		}
	}
	s.Elapsed = time.Since(start)
	return s, nil
}

// add counts round r of probe p into the session.
func (s *Session) add(p Probe, r Round) {
	s.Rounds = append(s.Rounds, r)
	s.Tally.Add(p, r.Coverage)
	if len(s.Rounds) == 1 {
		s.Verdict = r.Verdict // an empty session is unknown; its first round says
	} else {
		s.Verdict = models.Worse(s.Verdict, r.Verdict)
	}
}

// runRound tests one round's configuration, keeping its directory by the base's
// policy; warn hears why a run broke down whose history was checked anyway.
func runRound(ctx context.Context, cfg harness.Config, warn io.Writer) (Round, error) {
	cfg.Log = io.Discard
	t, err := harness.Test(ctx, cfg)
	res := t.Results
	if t.RunErr != nil && res.Dir != "" && warn != nil {
		fmt.Fprintf(warn, "zlockcheck run: %v\n", t.RunErr)
	}
	if err != nil && res.Dir == "" {
		return Round{}, err
	}
	r := Round{Dir: res.Dir, Verdict: res.Verdict, Coverage: res.Coverage}
	if err != nil {
		// The round broke down (its workers would not start, a fault would not
		// heal): the next would too.
		r.Verdict = models.Unknown
		return r, err
	}
	r.Honest = r.Verdict == models.Invalid
	for _, c := range res.Checks {
		if c.Cause != nil && r.Cause == "" {
			r.Cause = string(c.Cause.Class)
		}
		if c.Verdict == models.Invalid && (c.Cause == nil || !c.Cause.Class.Honest()) {
			r.Honest = false
		}
	}
	if t.Removed {
		r.Dir = "(removed: --keep failed)"
	}
	return r, nil
}

// roundConfig is round i's run: the base with the probe's regimes (the fixed knobs in
// place), faults and targets, for d.
func roundConfig(base harness.Config, p Probe, fixed workloads.Fixed, i int64, d time.Duration) harness.Config {
	c := base
	c.Seed = base.Seed + i
	c.Duration = d
	c.EndOnOverlap = !p.RunThrough
	c.EndOnRecipeBug = p.RunThrough
	c.Workload.Regimes = workloads.Fix(p.Regimes, fixed)
	c.Workload.RegimeLength = d / time.Duration(max(1, len(p.Regimes)))
	c.Workload.KeepAfterInfo = p.KeepWorkers
	if p.FencedCounter && harness.RecipeDoes(base.Recipe, workloads.Counter) {
		c.Workload.Kind, c.Workload.Fenced = workloads.Counter, true
		c.Check = models.Config{}
		c = c.Defaults()
	}
	return c.WithSetup(p.Setup)
}
