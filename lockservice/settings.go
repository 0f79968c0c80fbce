package lockservice

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Settings is one kind's own section of a run's configuration: what only its
// servers take (ZooKeeper's ticks and observers, Redis's topology, a database's
// keepalive). A run's config.json keeps it under "settings", of the type its kind
// registered (RegisterSettings); the flags that set it are the kind's own. A
// Settings value is never changed once made: its methods return new ones.
type Settings interface {
	// Defaults fills what is unset, and decides what the kind decides of the run
	// (its number of servers, p.Nodes, when the run leaves it open).
	Defaults(p Plan) (Settings, Plan)
	// Validate refuses what a run of the kind cannot do with these settings; the
	// error names the setting or the flag.
	Validate(p Plan) error
	// Server is the kind's part of Config (its Settings) for starting the run's
	// servers, their files under dir.
	Server(p Plan, dir string) any
	// Describe is the run's log line naming the servers once they serve (version:
	// what they said they run), before "serving after".
	Describe(p Plan, version string) string
	// Brief names the servers in a run's description ("" for the default kind's
	// plain deployment, as every run's description had it).
	Brief(p Plan) string
}

// Plan is what a kind's settings read of a run beyond themselves, and what their
// Defaults may decide (Nodes).
type Plan struct {
	// Kind is the run's kind (one of the kinds sharing these settings).
	Kind kind.Name
	// Recipe is the recipe under test; Catalogued says it is one of the catalogue's,
	// RedLock that it is RedLock over independent instances, Sentinel that its
	// client can find a Redis primary through sentinels, Cluster that its client
	// can follow a Redis Cluster's slots.
	Recipe     string
	Catalogued bool
	RedLock    bool
	Sentinel   bool
	Cluster    bool
	// Replicas says the recipe needs its Redis primary to have replicas.
	Replicas bool
	// ClusterOnly says the recipe runs on a Redis Cluster only (a RedLock over keys
	// of one cluster).
	ClusterOnly bool
	// Nodes is the number of servers the run asked for (0: the kind's to decide).
	Nodes int
	// SessionTimeout is the workers' session timeout.
	SessionTimeout time.Duration
	// Connect and SSH say where the servers are: an existing deployment, SSH nodes,
	// or (both unset) the run's own namespaces.
	Connect string
	SSH     *SSHConfig
	// Processes: the plain loop runs as one process per worker too
	// (--baseline-processes).
	Processes bool
	// Fenced: the counter workload writes only while its lock holds (--fenced).
	Fenced bool
	// Faults are the run's fault classes.
	Faults []nemesis.Class
	// CacheDir is where releases fetched from a registry are kept (maven.CacheDir's
	// override: "" is the user's cache directory).
	CacheDir string
}

// The optional abilities of a kind's settings, each asked for where it is used.

// Deployer lists the ways a run of p may be deployed when its settings leave the
// choice open (Redis's topologies), in the order a matrix tries them; none when they
// pin it.
type Deployer interface {
	Deployments(p Plan) []Settings
}

// Deployment names the deployment the settings pin (Redis's "replicas"), as a
// matrix's row shows it ("" when they pin none).
type Deployment interface {
	Deployment() string
}

// RowAdjuster adjusts a run whose service its recipe chose, where the kind wants more
// than its defaults for a matrix's row (PostgreSQL's standby, so that failover runs).
type RowAdjuster interface {
	ForRow(p Plan) Plan
}

// Clocked are the servers' timing knobs a violation's cause reads (ZooKeeper's
// tick and syncLimit).
type Clocked interface {
	Timing() (tick time.Duration, syncLimit int)
}

// SettingsSpec is how a kind's settings are made: registered once by its package
// (RegisterSettings).
type SettingsSpec struct {
	// Kinds are the kinds that take these settings (PostgreSQL and MariaDB share
	// theirs).
	Kinds []kind.Name
	// Title names the settings in messages ("Redis settings").
	Title string
	// Zero is the settings when a run gives none; config.json decodes into its type.
	Zero Settings
	// Flags defines the settings' flags on fs, with their defaults, and returns
	// what they say once fs is parsed (the error names the flag); nil: no flags.
	Flags func(fs *flag.FlagSet) func() (Settings, error)
	// Legacy reads them from the flat config.json of runs made before the settings
	// had their own section (keys such as tick_ns at the top level); nil: none
	// such.
	Legacy func(flat map[string]json.RawMessage) (Settings, error)
}

// settingsSpecs holds every kind's settings: written at start (init), read after.
var settingsSpecs []SettingsSpec

// RegisterSettings records how a kind's settings are made. Call it once, from the
// kind's package's init.
func RegisterSettings(s SettingsSpec) {
	for _, n := range s.Kinds {
		if _, taken := SettingsOf(n); taken || s.Zero == nil {
			panic(fmt.Sprintf("lockservice: second or empty settings for %q", n))
		}
	}
	settingsSpecs = append(settingsSpecs, s)
}

// SettingsOf returns the settings kind n takes (false: none of its own).
func SettingsOf(n kind.Name) (SettingsSpec, bool) {
	for _, s := range settingsSpecs {
		if slices.Contains(s.Kinds, kind.Of(n).Name) {
			return s, true
		}
	}
	return SettingsSpec{}, false
}

// AllSettings lists every kind's settings, in the order they were registered.
func AllSettings() []SettingsSpec { return slices.Clone(settingsSpecs) }

// Fits reports whether s is of the type kind n's settings are.
func Fits(n kind.Name, s Settings) bool {
	spec, ok := SettingsOf(n)
	return ok && s != nil && reflect.TypeOf(s) == reflect.TypeOf(spec.Zero)
}

// DecodeSettings reads kind n's settings from raw strictly: a field they do not
// have is an error.
func DecodeSettings(n kind.Name, raw json.RawMessage) (Settings, error) {
	spec, ok := SettingsOf(n)
	if !ok {
		return nil, fmt.Errorf("settings: the %s service has no settings of its own", kind.Of(n).Title)
	}
	v := reflect.New(reflect.TypeOf(spec.Zero))
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, fmt.Errorf("settings of %s: %w", kind.Of(n).Title, err)
	}
	return v.Elem().Interface().(Settings), nil
}

// Extra counts the servers a run has beside its Nodes (ZooKeeper's observers), one
// SSH node each.
type Extra interface {
	ExtraServers() int
}
