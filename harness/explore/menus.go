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
	// firstRound is the first pass's round length: ZooKeeper's menu was measured
	// with short first looks (BENCHMARKS.md, issue 28); the Redis and database menus
	// were tuned and proven with full rounds (zero), and keep them until they are
	// measured with short ones.
	firstRound time.Duration
}

// menus lists every kind's menu; the first is also the menu of a kind with none of
// its own (less what that kind refuses), with full rounds.
var menus = []kindMenu{
	{kinds: []kind.Name{kind.ZooKeeper}, firstRound: DefaultFirstRound,
		probes: func(b harness.Config) []Probe { return Probes(b.SessionTimeout, b.Workload.Fenced) }},
	{kinds: []kind.Name{kind.Redis},
		probes: func(b harness.Config) []Probe { return RedisProbes(b.SessionTimeout) }},
	{kinds: []kind.Name{kind.Postgres, kind.MariaDB},
		probes: func(b harness.Config) []Probe { return DatabaseProbes(b.SessionTimeout) }},
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
