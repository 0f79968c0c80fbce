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
	"slices"
	"sync"
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
	// Lanes is how many rounds run at once, each lane on an ensemble of its own
	// (0: the service's menu's, lanes; an existing ensemble or nodes over SSH have
	// one). The feedback chooses each lane's next round from the whole session's
	// tally, never a probe another lane is running; the first round invalid by more
	// than an honest cause ends every lane's.
	Lanes int
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
	// Elapsed is the round's wall time, set-up to check; EndedAt when it ended,
	// from the session's start.
	Elapsed time.Duration `json:"elapsed_ns"`
	EndedAt time.Duration `json:"ended_at_ns"`
	// Lane is the lane that ran it (1 and up; Config.Lanes).
	Lane int `json:"lane"`
}

// Session is what an exploring session did.
type Session struct {
	Rounds []Round `json:"rounds"`
	Tally  Tally   `json:"tally"`
	// Verdict is the worst round's (invalid over unknown over valid); a session with
	// no round is unknown.
	Verdict models.Verdict `json:"verdict"`
	Elapsed time.Duration  `json:"elapsed_ns"`
	// Detected is when the round that ended the session (invalid by more than an
	// honest cause) ended, from the session's start: the time to detect. Zero when
	// no round did. Elapsed also counts the other lanes' rounds winding down.
	Detected time.Duration `json:"detected_ns,omitempty"`
	// Lanes is how many lanes the session ran (Config.Lanes).
	Lanes int `json:"lanes"`
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

// Run is one session: it completes the base, starts one ensemble for every lane
// (harness.StartSite; Config.Lanes), spends the budget in rounds (each a harness.Test
// on its lane's ensemble) until it is spent, ctx is cancelled, or (without
// KeepGoing) a round is invalid by more than an honest cause (Round.Honest: an honest
// finding is kept and the session goes on, so it cannot hide a recipe bug), writes
// session.json into the session's directory and stops the ensembles. An error is a
// base that cannot run, an ensemble that would not start (the session has no Dir
// then), or a round that could not run or broke down: the rounds before it are
// returned with it.
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
	lanes, err := cfg.lanes(base)
	if err != nil {
		return Session{}, err
	}
	dir := rundir.ExploreDir(base.Store, time.Now())
	sites, err := startSites(ctx, base, dir, lanes)
	if err != nil {
		return Session{}, err
	}
	defer func() {
		for _, site := range sites {
			if cerr := site.Close(); cerr != nil && cfg.Warn != nil {
				fmt.Fprintf(cfg.Warn, "zlockcheck explore: removing the ensemble: %v\n", cerr)
			}
		}
	}()
	bases := make([]harness.Config, lanes)
	for i, site := range sites {
		bases[i] = base
		bases[i].Site = site
	}
	s, err := cfg.loopLanes(ctx, bases, func(ctx context.Context, rc harness.Config) (Round, error) {
		return runRound(ctx, rc, cfg.Warn)
	})
	s.Dir = dir
	if werr := rundir.Dir(dir).WriteJSON(rundir.Session, s); werr != nil && err == nil {
		err = werr
	}
	return s, err
}

// lanes is how many lanes the session runs on base: Config.Lanes, or the menu's,
// never more than the menu has probes; one on an ensemble the session does not
// start, which every lane would share.
func (cfg Config) lanes(base harness.Config) (int, error) {
	n := cfg.Lanes
	switch {
	case n < 0:
		return 0, fmt.Errorf("explore: %d lanes: want 1 or more (0: the %s menu's)", n, base.Service)
	case n > 1 && base.Connect != "":
		return 0, fmt.Errorf("explore: %d lanes on an existing ensemble (connect): its rounds would share its servers and lock; one lane", n)
	case n > 1 && base.SSH != nil:
		return 0, fmt.Errorf("explore: %d lanes on nodes over SSH: one ensemble runs there; one lane", n)
	case n == 0 && (base.Connect != "" || base.SSH != nil):
		n = 1
	case n == 0:
		n = menuOf(base.Service).lanes
	}
	return max(1, min(n, len(cfg.Menu))), nil
}

// startSites starts one ensemble per lane, at once, their servers' directories under
// the session's dir (servers/, then servers-lane2/ and on); on error it removes those
// that started.
func startSites(ctx context.Context, base harness.Config, dir string, lanes int) ([]*harness.Site, error) {
	sites := make([]*harness.Site, lanes)
	errs := make([]error, lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		wg.Go(func() { sites[i], errs[i] = harness.StartSite(ctx, base, filepath.Join(dir, laneServers(i+1))) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, site := range sites {
			if site != nil {
				err = errors.Join(err, site.Close())
			}
		}
		return nil, err
	}
	return sites, nil
}

// laneServers is lane's servers' directory in the session's directory.
func laneServers(lane int) string {
	if lane == 1 {
		return rundir.Servers
	}
	return fmt.Sprintf("%s-lane%d", rundir.Servers, lane)
}

// roundFunc runs and checks one round's configuration. An error (a round that could
// not run, or broke down on the way: its workers would not start) ends the session; a
// Round with a Dir is kept with it. Lanes call it at once.
type roundFunc func(ctx context.Context, cfg harness.Config) (Round, error)

// loop is the session's rounds on base, one lane.
func (cfg Config) loop(ctx context.Context, base harness.Config, run roundFunc) (Session, error) {
	return cfg.loopLanes(ctx, []harness.Config{base}, run)
}

// lanesState is what a session's lanes share, under mu.
type lanesState struct {
	mu    sync.Mutex
	start time.Time
	rng   *rand.Rand
	s     Session
	// next is the next round's number (from 0, in the order rounds start).
	next int
	// running are the probes lanes are running now.
	running map[string]bool
	// done: no round starts any more (a finding, an error); err is the first error.
	done bool
	err  error
}

// loopLanes is the session's rounds, one lane per base (each on its own site), all
// at once; the first round invalid by more than an honest cause (or an error) ends
// the others' rounds (their context is cancelled: they end as interrupted runs do, and
// are kept).
func (cfg Config) loopLanes(ctx context.Context, bases []harness.Config, run roundFunc) (Session, error) {
	if cfg.Round <= 0 {
		cfg.Round = DefaultRound
	}
	if cfg.Menu == nil {
		cfg.Menu = menuOf(bases[0].Service).probes(bases[0])
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &lanesState{start: time.Now(), rng: rand.New(rand.NewPCG(uint64(bases[0].Seed), 0x6578706c)),
		s: Session{Tally: NewTally(), Verdict: models.Unknown, Lanes: len(bases)}, running: map[string]bool{}}
	var wg sync.WaitGroup
	for i, base := range bases {
		wg.Go(func() { cfg.lane(ctx, cancel, i+1, base, st, run) })
	}
	wg.Wait()
	st.s.Elapsed = time.Since(st.start)
	return st.s, st.err
}

// lane runs rounds on one lane's base until the session is done or its budget spent.
func (cfg Config) lane(ctx context.Context, cancel func(), lane int, base harness.Config, st *lanesState, run roundFunc) {
	for ctx.Err() == nil {
		st.mu.Lock()
		p, i, rc, ok := cfg.nextRound(base, st)
		st.mu.Unlock()
		if !ok {
			return
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "round %d%s: %s (seed %d, %s)\n", i+1, laneTag(lane, st.s.Lanes), p.Name, rc.Seed, rc.Duration)
		}
		t := time.Now()
		r, err := run(ctx, rc)
		r.Probe, r.Seed, r.Elapsed, r.Lane = p.Name, rc.Seed, time.Since(t), lane
		r.AimLanded = aimLanded(p, r.Coverage)
		st.mu.Lock()
		r.EndedAt = time.Since(st.start)
		delete(st.running, p.Name)
		ended := cfg.roundEnded(st, p, r, err, i, lane)
		st.mu.Unlock()
		if ended {
			cancel()
			return
		}
	}
}

// nextRound chooses a lane's next round, or says none starts (the session is done,
// its context ended, or the budget left is too short). Under st.mu.
func (cfg Config) nextRound(base harness.Config, st *lanesState) (Probe, int, harness.Config, bool) {
	if st.done {
		return Probe{}, 0, harness.Config{}, false
	}
	left := cfg.Budget - time.Since(st.start)
	menu := slices.DeleteFunc(slices.Clone(cfg.Menu), func(p Probe) bool { return st.running[p.Name] })
	if len(menu) == 0 {
		return Probe{}, 0, harness.Config{}, false
	}
	p := Choose(menu, st.s.Tally.withRunning(st.running), st.rng)
	length := max(cfg.Round, p.FirstLook)
	if st.next < len(cfg.Menu) && cfg.FirstRound > 0 {
		length = max(min(cfg.Round, cfg.FirstRound), p.FirstLook)
	}
	if left < min(length, minRound) {
		return Probe{}, 0, harness.Config{}, false
	}
	i := st.next
	st.next++
	st.running[p.Name] = true
	return p, i, roundConfig(base, p, cfg.Fixed, int64(i), min(length, left)), true
}

// roundEnded counts round r (number i, of probe p) into the session and says whether
// it ends the session: an error, or (without KeepGoing) a round invalid by more than
// an honest cause. A round that ended with the session (another lane's finding, ctx
// cancelled) is kept, its error not the session's. Under st.mu.
func (cfg Config) roundEnded(st *lanesState, p Probe, r Round, err error, i, lane int) bool {
	if err != nil {
		if r.Dir != "" {
			st.s.Rounds = append(st.s.Rounds, r)
		}
		if st.done {
			return false
		}
		st.done, st.err = true, fmt.Errorf("round %d (%s): %w", i+1, p.Name, err)
		return true
	}
	st.s.add(p, r)
	if cfg.Log != nil {
		missed := ""
		if !r.AimLanded {
			missed = " (its aim did not land: another look comes soon)"
		}
		fmt.Fprintf(cfg.Log, "round %d%s: %s in %s: %s%s\n", i+1, laneTag(lane, st.s.Lanes), r.Verdict, r.Elapsed.Round(time.Second), r.Dir, missed)
	}
	if r.Verdict == models.Invalid && !cfg.KeepGoing && !r.Honest && !st.done {
		st.done, st.s.Detected = true, r.EndedAt
		return true
	}
	return false
}

// laneTag names a round's lane in the log when the session has more than one.
func laneTag(lane, lanes int) string {
	if lanes < 2 {
		return ""
	}
	return fmt.Sprintf(" (lane %d)", lane)
}

// Finding is the round that ended the session: the first to end invalid by more
// than an honest cause (false when none was). With lanes it need not be the last
// round: the others' interrupted rounds end after it.
func (s Session) Finding() (Round, bool) {
	var found Round
	ok := false
	for _, r := range s.Rounds {
		if r.Verdict == models.Invalid && !r.Honest && (!ok || r.EndedAt < found.EndedAt) {
			found, ok = r, true
		}
	}
	return found, ok
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
