package explore

import (
	"cmp"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// Probe is one kind of round: the regimes its workload goes through and the named
// fault setup its nemesis runs (its Name is the probe's, a few words saying what it
// does; no classes: a fault-free round), aimed at the situations (coverage rows) it
// is there to reach.
type Probe struct {
	nemesis.Setup
	// Regimes are the workload's regimes, in turn, each a share of the round.
	Regimes []workloads.Regime `json:"regimes"`
	// KeepWorkers keeps a worker whose call ended with an unknown outcome, with its
	// session, as applications do (workloads.Config.KeepAfterInfo).
	KeepWorkers bool `json:"keep_workers,omitempty"`
	// Aims are the coverage rows (coverage.Row*) the probe exists to reach; the
	// feedback sends rounds to the probe whose aims are least covered.
	Aims []string `json:"aims"`
	// RunThrough runs the round to its end after an overlap: the probe's faults make
	// honest overlaps (a key a server forgot or expired early), and a recipe's bug
	// shows only after them (a holder that never learns it lost the key).
	RunThrough bool `json:"run_through,omitempty"`
	// FirstLook, when longer than the session's first-pass rounds (Config.FirstRound),
	// is this probe's first round, even beyond Config.Round: a probe whose faults come
	// seldom and must land at a moment needs a few of them to show anything. When it
	// is longer than Config.Round, every later round of the probe is that long too: a
	// look the feedback sends later needs as many of those faults as the first.
	FirstLook time.Duration `json:"first_look_ns,omitempty"`
	// FencedCounter runs the round's workload as the fenced counter when the recipe
	// does the counter workload (its catalogue entry says so), whatever the base's
	// workload: fencing is then checked where a holder outlives its lease. Other
	// recipes run the base's workload.
	FencedCounter bool `json:"fenced_counter,omitempty"`
}

// holdersCutOff is the name of the probe that cuts holders off mid-hold (Probes).
const holdersCutOff = "holders cut off"

// Probes is explore's menu for workers with this session timeout. Faults whose only
// possible overlaps are unfenced ones (a paused holder, a session expired under a
// holder: no recipe can prevent them) are in only when the workload is fenced, where
// fencing must hold.
func Probes(sessionTimeout time.Duration, fenced bool) []Probe {
	std := func(names ...string) []workloads.Regime {
		var out []workloads.Regime
		for _, r := range workloads.StandardRegimes(sessionTimeout, true) {
			if slices.Contains(names, r.Name) {
				out = append(out, r)
			}
		}
		return out
	}
	ms := time.Millisecond
	// Every hold outlives a session: a holder cut off mid-hold must learn it lost the
	// lock before the next is granted.
	longHoldsOnly := []workloads.Regime{{Name: "long holds only",
		Timeouts: []workloads.Span{{Weight: 1, Min: 5 * time.Second, Max: 20 * time.Second}},
		Holds:    []workloads.Span{{Weight: 1, Min: 2 * sessionTimeout, Max: 4 * sessionTimeout}}, Active: 0.6}}
	holder := []nemesis.ClientTarget{nemesis.TargetHolder}
	// The narrow fault-free races (coverage.RowEdge): a predecessor that goes away
	// within a round trip of a waiter's getChildren, or of its give-up. Two workers
	// with sub-millisecond holds and think times near a round trip: the holder
	// releases just as the other queues behind it (acquire timeouts long enough for
	// a waiter left without a wake-up to be seen, half a session timeout, by the
	// harness's missed wake-up watch).
	holderLeaves := workloads.Regime{Name: "holder leaves as a waiter queues",
		Timeouts: []workloads.Span{{Weight: 1, Min: sessionTimeout * 3 / 4, Max: sessionTimeout * 5 / 4}},
		Holds:    []workloads.Span{{Weight: 1, Max: ms}},
		Thinks:   []workloads.Span{{Weight: 1, Max: 2 * ms}}, Active: 0.4}
	// Three workers whose acquires give up after about one hold: a waiter gives up as
	// its predecessor leaves, and acquires again a round trip later.
	giveUpAsQueueMoves := workloads.Regime{Name: "waiters give up as the queue moves",
		Timeouts: []workloads.Span{{Weight: 1, Min: 2 * ms, Max: 10 * ms}},
		Holds:    []workloads.Span{{Weight: 1, Min: ms, Max: 5 * ms}},
		Thinks:   []workloads.Span{{Weight: 1, Max: 2 * ms}}, Active: 0.6}
	probes := []Probe{
		{Setup: nemesis.Setup{Name: "queue churn"}, Regimes: append([]workloads.Regime{holderLeaves}, std("full queue", "impatient waiters", "sparse")...),
			Aims: []string{coverage.RowTimedOutQueued, coverage.RowPredecessorGone, coverage.RowEdge}},
		{Setup: nemesis.Setup{Name: "replies lost", Classes: []nemesis.Class{nemesis.ClassReplyLoss},
			ClientTargets: []nemesis.ClientTarget{nemesis.TargetIdle}, Interval: 2 * time.Second},
			KeepWorkers: true, Regimes: []workloads.Regime{{Name: "creates in flight",
				Timeouts: []workloads.Span{{Weight: 1, Min: 5 * time.Second, Max: 10 * time.Second}},
				Holds:    []workloads.Span{{Weight: 1, Min: ms, Max: 50 * ms}},
				Thinks:   []workloads.Span{{Weight: 1, Max: 200 * ms}}, Active: 1}},
			// A reply loss lasts seconds and must catch a create in flight: one in
			// five 8 s first looks saw none (BENCHMARKS.md, issue 28).
			FirstLook: 12 * time.Second,
			Aims:      []string{coverage.RowFaultAcquiring, coverage.RowAcquireInfo}},
		// A holder's connections silenced for a moment, then reset
		// (nemesis.ConnectionReset): the delete of a release sent meanwhile is lost
		// for good, the client reconnects at once to its live session, and a recipe
		// that takes the lost delete for a release leaves its node behind that
		// session (a blocking orphan). Until 2026-11-30 a client partition of 0.85 of
		// a session did this, and a third of its looks missed: the kernel
		// retransmitted the delete about 3.4 s after it was sent, as the cut healed
		// and before the client had reconnected elsewhere, and the old connection's
		// server applied it (mutant-swallowed-release at 34 to 110 s; BENCHMARKS.md).
		{Setup: nemesis.Setup{Name: "releases cut off", Classes: []nemesis.Class{nemesis.ClassConnectionReset},
			ClientTargets: holder, Interval: 2 * time.Second},
			KeepWorkers: true, Regimes: []workloads.Regime{{Name: "short holds",
				Timeouts: []workloads.Span{{Weight: 1, Min: 5 * time.Second, Max: 10 * time.Second}},
				Holds:    []workloads.Span{{Weight: 1, Min: 10 * ms, Max: 100 * ms}},
				Thinks:   []workloads.Span{{Weight: 1, Max: 100 * ms}}, Active: 1}},
			Aims: []string{coverage.RowFaultReleasing, coverage.RowReleaseInfo}},
		{Setup: nemesis.Setup{Name: holdersCutOff, Classes: []nemesis.Class{nemesis.ClassClientPartition}, ClientTargets: holder, Interval: 2 * time.Second},
			Regimes: longHoldsOnly, Aims: []string{coverage.RowFaultHolding, coverage.RowLongHold, coverage.RowLost}},
		{Setup: nemesis.Setup{Name: "narrow races"}, Regimes: []workloads.Regime{holderLeaves, giveUpAsQueueMoves},
			Aims: []string{coverage.RowEdge}},
		{Setup: nemesis.Setup{Name: "holder's follower cut off", Classes: []nemesis.Class{nemesis.ClassPartition},
			Shapes: []nemesis.Shape{nemesis.IsolateFollowerQuorum}, Interval: 3 * time.Second},
			Regimes: longHoldsOnly, Aims: []string{coverage.RowServerFaultHeld, coverage.RowLost}},
		{Setup: nemesis.Setup{Name: "crashing and cut-off clients",
			Classes:       []nemesis.Class{nemesis.ClassClientKill, nemesis.ClassClientPartition, nemesis.ClassClientServerPartition},
			ClientTargets: []nemesis.ClientTarget{nemesis.TargetRandomClient, nemesis.TargetHolder, nemesis.TargetWaiter}, Interval: 3 * time.Second},
			Regimes: std("full queue", "impatient waiters"),
			Aims:    []string{coverage.RowFaultAcquiring, coverage.RowFaultHolding, coverage.RowPredecessorGone}},
		{Setup: nemesis.Setup{Name: "server faults", Classes: []nemesis.Class{nemesis.ClassKill, nemesis.ClassPause, nemesis.ClassPartition, nemesis.ClassPacket},
			Interval: 5 * time.Second},
			Regimes: std("full queue", "long holds"), Aims: []string{coverage.RowServerFaultHeld}},
	}
	// The history of revisions compacted while waiters wait (etcd: a waiter about to
	// watch its predecessor from a revision compaction discarded is told so, and must
	// not leave its key behind, #9715); a service without that history drops it.
	probes = append(probes, Probe{Setup: nemesis.Setup{Name: "history compacted under waiters",
		Classes: []nemesis.Class{nemesis.ClassCompaction}, Interval: 500 * time.Millisecond},
		Regimes: std("full queue", "impatient waiters"), Aims: []string{coverage.RowTimedOutQueued, coverage.RowServerFaultHeld}})
	if fenced {
		probes = append(probes, Probe{Setup: nemesis.Setup{Name: "paused and expired holders",
			Classes: []nemesis.Class{nemesis.ClassClientPause, nemesis.ClassSessionExpire}, ClientTargets: holder, Interval: 2 * time.Second},
			Regimes: std("long holds"), Aims: []string{coverage.RowFaultHolding, coverage.RowLongHold}})
	}
	return probes
}

// EtcdProbes are ZooKeeper's probes (Probes) with one more, fifth, after *holders
// cut off*: a release whose reply is lost. An etcd lock's key is named after its
// session's lease, so the same session's next lock puts the same key, and an
// application that sends the delete again by name after a lost reply deletes that
// newer lock (etcd-io/etcd#22082). The holder's replies are lost for half its
// session, from a moment it holds: its release is applied, its answer lost, and the
// session outlives the loss (a recipe that counts its lease from its renewals' sends
// gives up on a session after a longer one). The worker is kept and goes on locking
// on that session, against one other worker, both with short holds and almost no
// thinks: the lock goes back and forth, and the worker's next lock is often put
// just before its retried delete lands.
//
// It comes right after *holders cut off* (fifth), after the probes that catch the
// other families in their first seconds, because it needs a long look: only some
// losses make the overlap.
func EtcdProbes(sessionTimeout time.Duration, fenced bool) []Probe {
	ms := time.Millisecond
	probes := Probes(sessionTimeout, fenced)
	at := slices.IndexFunc(probes, func(p Probe) bool { return p.Name == holdersCutOff }) + 1
	return slices.Insert(probes, at, Probe{Setup: nemesis.Setup{Name: "release replies lost",
		Classes: []nemesis.Class{nemesis.ClassReplyLoss}, ClientTargets: []nemesis.ClientTarget{nemesis.TargetHolder},
		Interval: 2 * time.Second, ClientHold: sessionTimeout / 2},
		KeepWorkers: true, Regimes: []workloads.Regime{{Name: "two back and forth",
			Timeouts: []workloads.Span{{Weight: 1, Min: 5 * time.Second, Max: 10 * time.Second}},
			Holds:    []workloads.Span{{Weight: 1, Max: 50 * ms}},
			Thinks:   []workloads.Span{{Weight: 1, Max: 20 * ms}}, Active: 0.4}},
		// Measured with run (2 workers, these holds and thinks, 2 s sessions, 60 s,
		// mutant-etcd-unlock-retried, docs/etcd.md): a loss of half the session
		// caught it in 6 runs of 6 (4 to 48 s in, 17 to 25 losses a minute), one of
		// 0.85 of it in 1 of 3; three workers with 300 ms thinks, 1 of 3 either way;
		// holds under 5 ms with 50 ms thinks, 0 of 3 (the holder released before the
		// loss landed: 2 to 9 releases unknown a minute); losses every second, 4 of 5.
		// In explore's rounds of 90 s the first overlap came 10 to 84 s in (5 seeds
		// of 5); over those 11 runs it came 34 s in on average, so a look of 90 s
		// would miss about one session in 14 and one of two minutes one in 32.
		FirstLook: 2 * time.Minute,
		Aims:      []string{coverage.RowFaultReleasing, coverage.RowReleaseInfo}})
}

// Tally is what a session has exercised so far: the sum of its rounds' coverage
// tables, each probe's own sum, and how many rounds each probe ran.
type Tally struct {
	Coverage coverage.Table            `json:"coverage"`
	ByProbe  map[string]coverage.Table `json:"probe_coverage,omitempty"`
	Runs     map[string]int            `json:"probe_rounds"`
}

// NewTally is an empty tally.
func NewTally() Tally { return Tally{Runs: map[string]int{}, ByProbe: map[string]coverage.Table{}} }

// Add counts one round of probe p that exercised covered.
func (t *Tally) Add(p Probe, covered coverage.Table) {
	t.Runs[p.Name]++
	t.Coverage = coverage.Sum(t.Coverage, covered)
	if t.ByProbe == nil {
		t.ByProbe = map[string]coverage.Table{}
	}
	t.ByProbe[p.Name] = coverage.Sum(t.ByProbe[p.Name], covered)
}

// withRunning is t with one more round of every probe running counted in Runs (its
// coverage comes when it ends): Choose then spreads a session's lanes over the menu.
func (t Tally) withRunning(running map[string]bool) Tally {
	if len(running) == 0 {
		return t
	}
	t.Runs = maps.Clone(t.Runs)
	if t.Runs == nil {
		t.Runs = map[string]int{}
	}
	for name := range running {
		t.Runs[name]++
	}
	return t
}

// count is how often the session reached the situation of coverage row id.
func (t Tally) count(id string) int {
	r, _ := t.Coverage.Row(id)
	return r.Count
}

// aims are p's aims that apply to the session's service: a row the tally marks not
// applicable (a queue's row on Redis) is one no probe can raise there, and a row of
// findings (coverage.Finding: orphans) one only a bug raises; neither is counted
// against p, nor makes it the least covered for ever.
func (t Tally) aims(p Probe) []string {
	var out []string
	for _, a := range p.Aims {
		if coverage.Finding(a) {
			continue
		}
		if r, ok := t.Coverage.Row(a); !ok || r.NotApplicable == "" {
			out = append(out, a)
		}
	}
	return out
}

// Landed reports whether p's own rounds have reached one of its aims (true for a
// probe with no aim that applies).
func (t Tally) Landed(p Probe) bool {
	return landed(t.aims(p), t.ByProbe[p.Name])
}

// aimLanded reports whether cov reached one of p's aims that apply there (true when
// none applies: nothing to miss).
func aimLanded(p Probe, cov coverage.Table) bool { return landed(p.Aims, cov) }

// landed reports whether cov counts one of aims above 0, leaving out those cov marks
// not applicable (true when none is left: nothing to miss).
func landed(aims []string, cov coverage.Table) bool {
	applicable := 0
	for _, a := range aims {
		r, ok := cov.Row(a)
		if ok && r.NotApplicable != "" || coverage.Finding(a) {
			continue
		}
		applicable++
		if ok && r.Count > 0 {
			return true
		}
	}
	return applicable == 0
}

// pulls reports whether p aims at a situation the session's table flags not
// exercised (a row at 0 where bugs live).
func (t Tally) pulls(p Probe) bool {
	for _, a := range t.aims(p) {
		if r, ok := t.Coverage.Row(a); ok && r.NotExercised != "" {
			return true
		}
	}
	return false
}

// Choose picks the next round's probe: first every probe once, in menu order (the
// cheap fault-free probe first). Then, among the probes that have not run more than
// twice as often as the least run one (so that a probe whose aim no run can reach,
// an orphan under a lock that expires, does not take every round):
//
//  1. a probe aimed at a situation the session's coverage table flags not exercised
//     (the table pulls the next round to what the session has not reached);
//  2. else a probe whose own rounds have not landed its aim yet (its first look
//     missed: another, a full round, comes soon);
//  3. else the probes left that have run the fewest rounds: every probe's second
//     look (a full round) comes before any probe's third, since a look can land its
//     aim and still miss a bug that needs its faults at one moment;
//
// and among those the probe whose least exercised aim (over the session) has the
// lowest count, fewer rounds breaking ties, then rng. (Once every aim has landed,
// the counts compare rows whose natural rates differ, dozens of grants after a loss
// to a handful of faults on acquirers, so by counts alone the probe of a rare row
// took every other round: in a Redis session of 2026-11-30, *acquirers paused* ran
// three times before *instances slowed, paused, cut off* ran twice, and that second
// look found mutant-redis-setnx-then-expire at 72 s.)
func Choose(menu []Probe, t Tally, rng *rand.Rand) Probe {
	for _, p := range menu {
		if t.Runs[p.Name] == 0 {
			return p
		}
	}
	fewest := t.Runs[menu[0].Name]
	for _, p := range menu {
		fewest = min(fewest, t.Runs[p.Name])
	}
	menu = slices.DeleteFunc(slices.Clone(menu), func(p Probe) bool { return t.Runs[p.Name] > 2*fewest })
	for _, want := range []func(Probe) bool{t.pulls, func(p Probe) bool { return !t.Landed(p) }} {
		if some := slices.DeleteFunc(slices.Clone(menu), func(p Probe) bool { return !want(p) }); len(some) > 0 {
			return leastCovered(some, t, rng)
		}
	}
	return leastCovered(slices.DeleteFunc(menu, func(p Probe) bool { return t.Runs[p.Name] > fewest }), t, rng)
}

// leastCovered is the probe of menu whose least exercised aim has the lowest count
// over the session, fewer rounds breaking ties, then rng.
func leastCovered(menu []Probe, t Tally, rng *rand.Rand) Probe {
	least := func(p Probe) int {
		m := -1
		for _, a := range t.aims(p) {
			if n := t.count(a); m < 0 || n < m {
				m = n
			}
		}
		if m < 0 {
			return math.MaxInt // no aim that applies: last
		}
		return m
	}
	best := []Probe{menu[0]}
	for _, p := range menu[1:] {
		b := best[0]
		switch c := cmpScore(least(p), t.Runs[p.Name], least(b), t.Runs[b.Name]); {
		case c < 0:
			best = []Probe{p}
		case c == 0:
			best = append(best, p)
		}
	}
	return best[rng.IntN(len(best))]
}

// cmpScore orders probes: a lower least-covered count first, then fewer rounds.
func cmpScore(leastA, runsA, leastB, runsB int) int {
	if leastA != leastB {
		return cmp.Compare(leastA, leastB)
	}
	return runsA - runsB
}
