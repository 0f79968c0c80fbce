package explore

import (
	"slices"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// kindMenu is explore's menu for some kinds of service: the one place in explore
// that names a kind.
type kindMenu struct {
	kinds []kind.Name
	// probes is the menu for a base run, before Menu drops what the base refuses.
	probes func(base harness.Config) []Probe
	// firstRound is the first pass's round length (zero: full rounds). Every menu
	// takes short first looks: ZooKeeper's since issue 28, Redis's and the
	// databases' since issue 38: of six pairs of Redis sessions side by side (the
	// same mutant and seed) that caught the mutant at least once, four caught it
	// sooner with 8 s first looks, two with full rounds, even in median
	// (BENCHMARKS.md).
	firstRound time.Duration
	// lanes is how many rounds a session runs at once, each on its own ensemble
	// (Config.Lanes; zero is one).
	lanes int
}

// menus lists every kind's menu; the first (ZooKeeper's) is also the menu of a kind
// with none of its own (less what that kind refuses), with full rounds.
var menus = []kindMenu{
	{kinds: []kind.Name{kind.ZooKeeper}, firstRound: DefaultFirstRound,
		probes: func(b harness.Config) []Probe { return Probes(b.SessionTimeout, b.Workload.Fenced) }},
	// etcd's Mutex is a queue of keys, each waiter waiting on the one before it, and
	// a session a lease the servers keep: ZooKeeper's menu fits it, and one probe
	// more at its end (EtcdProbes).
	{kinds: []kind.Name{kind.Etcd}, firstRound: DefaultFirstRound,
		probes: func(b harness.Config) []Probe { return EtcdProbes(b.SessionTimeout, b.Workload.Fenced) }},
	{kinds: []kind.Name{kind.Redis}, firstRound: DefaultFirstRound, lanes: 4,
		probes: func(b harness.Config) []Probe { return RedisProbes(b.SessionTimeout, failsOverItself(b)) }},
	{kinds: []kind.Name{kind.Postgres, kind.MariaDB}, firstRound: DefaultFirstRound, lanes: 3,
		probes: func(b harness.Config) []Probe { return DatabaseProbes(b.SessionTimeout) }},
}

// selfFailingOver is a service's settings that say whether its servers fail over on
// their own (Redis's sentinel topology).
type selfFailingOver interface{ FailsOverItself() bool }

// failsOverItself reports whether base's servers fail over on their own.
func failsOverItself(base harness.Config) bool {
	s, ok := base.Settings.(selfFailingOver)
	return ok && s.FailsOverItself()
}

// menuOf is the menu of kind n ("" is kind.Default).
func menuOf(n kind.Name) kindMenu {
	n = kind.Of(n).Name
	for _, m := range menus {
		if slices.Contains(m.kinds, n) {
			return m
		}
	}
	return kindMenu{probes: menus[0].probes}
}
