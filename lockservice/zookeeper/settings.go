package zookeeper

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Settings are a run's choices about its ZooKeeper servers: its section of
// config.json ("settings"), set by the flags of the same names. Their JSON names
// are the ones config.json had at its top level before the section existed.
type Settings struct {
	// Observers is the number of observers beside the voting servers (on SSH nodes,
	// the last Observers of them): they serve clients but do not vote (Members).
	Observers int `json:"observers,omitempty"`
	// ZKHome is a ZooKeeper install to use instead of Debian's package (on SSH nodes:
	// a path on each node).
	ZKHome string `json:"zk_home,omitempty"`
	// ZKVersion is a ZooKeeper release from Maven Central to run instead of Debian's
	// package: one of Releases (releases/pom.xml); "" is Debian's.
	ZKVersion string `json:"zk_version,omitempty"`
	// Tick, InitLimit and SyncLimit are the servers' timing knobs (0: the defaults).
	Tick      time.Duration `json:"tick_ns"`
	InitLimit int           `json:"init_limit"`
	SyncLimit int           `json:"sync_limit"`
	// NoForceSync runs the servers with forceSync=no (EnsembleConfig): a weaker
	// durability model, for throughput experiments only.
	NoForceSync bool `json:"no_force_sync,omitempty"`
	// Heap is each server's JVM heap ("": 256m) and FullJIT lets their JVMs use C2
	// (EnsembleConfig): knobs for the tuning benchmark.
	Heap    string `json:"server_heap,omitempty"`
	FullJIT bool   `json:"server_full_jit,omitempty"`
}

var (
	_ lockservice.Settings = Settings{}
	_ lockservice.Clocked  = Settings{}
)

func init() {
	lockservice.RegisterSettings(lockservice.SettingsSpec{
		Kinds: []kind.Name{kind.ZooKeeper}, Title: "ZooKeeper settings", Zero: Settings{},
		Flags: flags, Legacy: legacy,
	})
}

// DefaultSettings are the settings of a run that gives none.
func DefaultSettings() Settings {
	return Settings{Tick: DefaultTick, InitLimit: DefaultInitLimit, SyncLimit: DefaultSyncLimit}
}

// flags defines the ZooKeeper settings' flags on fs.
func flags(fs *flag.FlagSet) func() (lockservice.Settings, error) {
	s := DefaultSettings()
	fs.IntVar(&s.Observers, "observers", 0, "ZooKeeper observers beside the --nodes voting servers: they serve clients but do not vote (with --ssh-nodes, the last N nodes); docs/running.md#observers")
	fs.StringVar(&s.ZKHome, "zk-home", "", "ZooKeeper install to use instead of Debian's zookeeper package")
	fs.StringVar(&s.ZKVersion, "zk-version", "", "ZooKeeper release from Maven Central to run instead of Debian's zookeeper package (3.8.0): "+strings.Join(Releases(), " or ")+"; fetched into the cache by make setup or on first use")
	fs.DurationVar(&s.Tick, "tick", s.Tick, "ZooKeeper servers' tickTime")
	fs.IntVar(&s.InitLimit, "init-limit", s.InitLimit, "ZooKeeper servers' initLimit (ticks)")
	fs.IntVar(&s.SyncLimit, "sync-limit", s.SyncLimit, "ZooKeeper servers' syncLimit (ticks)")
	fs.StringVar(&s.Heap, "server-heap", "", "JVM heap of each ZooKeeper server, e.g. 1g (default 256m)")
	fs.BoolVar(&s.FullJIT, "server-full-jit", false, "let the ZooKeeper servers' JVMs compile with C2 too (default: C1 only, which starts faster)")
	fs.BoolVar(&s.NoForceSync, "no-force-sync", false, "ZooKeeper servers acknowledge writes before fsync (forceSync=no): a weaker durability model, for throughput experiments; recorded in config.json")
	return func() (lockservice.Settings, error) { return s, nil }
}

// legacy reads the settings from a config.json written before they had a section:
// the same keys, at the top level.
func legacy(flat map[string]json.RawMessage) (lockservice.Settings, error) {
	var s Settings
	for key, dst := range map[string]any{
		"observers": &s.Observers, "zk_home": &s.ZKHome, "tick_ns": &s.Tick, "init_limit": &s.InitLimit,
		"sync_limit": &s.SyncLimit, "no_force_sync": &s.NoForceSync, "server_heap": &s.Heap, "server_full_jit": &s.FullJIT,
	} {
		if raw, ok := flat[key]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return s, nil
}

// Defaults fills the unset timing knobs; on SSH nodes the voting servers are the
// nodes less the observers.
func (s Settings) Defaults(p lockservice.Plan) (lockservice.Settings, lockservice.Plan) {
	d := DefaultSettings()
	if s.Tick == 0 {
		s.Tick = d.Tick
	}
	if s.InitLimit == 0 {
		s.InitLimit = d.InitLimit
	}
	if s.SyncLimit == 0 {
		s.SyncLimit = d.SyncLimit
	}
	if p.SSH != nil {
		p.Nodes = len(p.SSH.Nodes) - s.Observers
	}
	return s, p
}

// Validate refuses observers the run cannot have, a session timeout under two ticks
// and a heap the JVM would not take.
func (s Settings) Validate(p lockservice.Plan) error {
	switch {
	case s.Observers < 0:
		return fmt.Errorf("observers: want 0 or more, got %d", s.Observers)
	case p.SSH != nil && s.Observers >= len(p.SSH.Nodes):
		return fmt.Errorf("observers: %d of the %d ssh-nodes leaves no voting server", s.Observers, len(p.SSH.Nodes))
	case p.Nodes+s.Observers > 9:
		return fmt.Errorf("observers: want at most 9 servers in all, got %d voting and %d observers", p.Nodes, s.Observers)
	case s.Observers > 0 && p.Connect != "":
		return errors.New("observers: an existing ensemble (connect) has the observers its owners gave it; --observers is for the ensembles zlockcheck starts")
	case p.SessionTimeout < 2*s.Tick:
		return fmt.Errorf("session-timeout: want at least 2 ticks (%s), got %s", 2*s.Tick, p.SessionTimeout)
	case s.Heap != "" && !isHeapSize(s.Heap):
		return fmt.Errorf("server-heap: want a JVM size such as 256m or 1g, got %q", s.Heap)
	}
	if err := s.validateVersion(p); err != nil {
		return err
	}
	return validateConnect(p)
}

// validateVersion refuses a release that releases/pom.xml does not pin, and one
// asked of servers zlockcheck does not start from this machine's cache.
func (s Settings) validateVersion(p lockservice.Plan) error {
	switch {
	case s.ZKVersion == "":
		return nil
	case !slices.Contains(Releases(), s.ZKVersion):
		return fmt.Errorf("zk-version: want one of %s (releases/pom.xml pins them), got %q", strings.Join(Releases(), ", "), s.ZKVersion)
	case s.ZKHome != "":
		return errors.New("zk-version: give --zk-home or --zk-version, not both")
	case p.Connect != "":
		return errors.New("zk-version: an existing ensemble (connect) runs the version its owners installed; --zk-version is for the ensembles zlockcheck starts")
	case p.SSH != nil:
		return errors.New("zk-version: on SSH nodes the servers run the install already there (--zk-setup or --zk-home); --zk-version is for the ensembles zlockcheck starts here")
	}
	return nil
}

// validateConnect checks an existing ensemble's addresses (--connect): the nemesis
// aims session-expire and reply-loss at port 2181.
func validateConnect(p lockservice.Plan) error {
	if p.Connect == "" {
		return nil
	}
	addrs, err := ParseConnect(p.Connect)
	if err != nil {
		return err
	}
	for _, cl := range p.Faults {
		if cl != nemesis.ClassSessionExpire && cl != nemesis.ClassReplyLoss {
			continue
		}
		for _, a := range addrs {
			if _, port, _ := net.SplitHostPort(a); port != strconv.Itoa(DefaultConnectPort) {
				return fmt.Errorf("nemesis: %s needs the servers' client port to be %d, connect names %s", cl, DefaultConnectPort, a)
			}
		}
	}
	return nil
}

// isHeapSize reports whether h is a JVM -Xmx size: a number with an optional k, m
// or g.
func isHeapSize(h string) bool {
	digits := strings.TrimRight(h, "kKmMgG")
	if len(h)-len(digits) > 1 || digits == "" || digits[0] == '0' {
		return false
	}
	return strings.Trim(digits, "0123456789") == ""
}

// Server is the ensemble's configuration for the run (start).
func (s Settings) Server(p lockservice.Plan, dir string) any {
	return EnsembleConfig{
		Nodes: p.Nodes, Observers: s.Observers, ZKHome: s.ZKHome, Release: s.ZKVersion, CacheDir: p.CacheDir, Dir: dir,
		Tick: s.Tick, InitLimit: s.InitLimit, SyncLimit: s.SyncLimit, NoForceSync: s.NoForceSync,
		Heap: s.Heap, FullJIT: s.FullJIT, MaxSessionTimeout: MaxSessionTimeout(p.SessionTimeout),
	}
}

// MaxSessionTimeout is the servers' maxSessionTimeout for workers asking for
// sessionTimeout: room for it, and never under ZooKeeper's usual 60 s.
func MaxSessionTimeout(sessionTimeout time.Duration) time.Duration {
	return max(60*time.Second, 2*sessionTimeout)
}

// Describe names the ensemble in the run's log.
func (s Settings) Describe(p lockservice.Plan, _ string) string {
	if s.Observers > 0 {
		return fmt.Sprintf("ensemble of %d and %d observer(s)", p.Nodes, s.Observers)
	}
	return fmt.Sprintf("ensemble of %d", p.Nodes)
}

// Brief names the ensemble in a run's description: nothing for a plain one, the
// default service as every run's description had it.
func (s Settings) Brief(p lockservice.Plan) string {
	if s.Observers > 0 {
		return fmt.Sprintf("%d servers and %d observer(s)", p.Nodes, s.Observers)
	}
	return ""
}

// ExtraServers are the observers: servers beside the voting ones, one SSH node
// each.
func (s Settings) ExtraServers() int { return s.Observers }

// Timing is the servers' tick and syncLimit, which a violation's cause reads.
func (s Settings) Timing() (time.Duration, int) { return s.Tick, s.SyncLimit }
