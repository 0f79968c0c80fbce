package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// A run's service kind's own settings are Config.Settings, of the type the kind's
// package registered (lockservice.RegisterSettings): what each is when unset, what it
// refuses, how the run's log names the servers are the kind's. Nothing here names a
// kind.

// plan is what the service's settings read of the run (lockservice.Plan).
func (c Config) plan() lockservice.Plan {
	r, catalogued := findRecipe(c.Recipe)
	return lockservice.Plan{
		Kind: kind.Of(c.Service).Name, Recipe: c.Recipe, Catalogued: catalogued, RedLock: catalogued && r.RedLock, Sentinel: catalogued && r.Sentinel, Cluster: catalogued && r.Cluster, Replicas: catalogued && r.Replicas,
		ClusterOnly: catalogued && r.ClusterQuorum, SessionTimeout: c.SessionTimeout,
		Nodes: c.Nodes, Connect: c.Connect, SSH: c.SSH,
		Processes: len(c.BaselineArgv) > 0, Fenced: c.Workload.Fenced, Faults: c.Nemesis,
		CacheDir: c.Worker.CacheDir,
	}
}

// settings are the run's service's settings: c.Settings when they are its kind's,
// else the kind's zero ones (nil for a kind with none).
func (c Config) settings() lockservice.Settings {
	if lockservice.Fits(c.Service, c.Settings) {
		return c.Settings
	}
	if spec, ok := lockservice.SettingsOf(c.Service); ok {
		return spec.Zero
	}
	return nil
}

// settingsDefaults fills the service's settings and what they decide of the run (its
// number of servers). Settings of another kind are left for Validate to refuse.
func (c Config) settingsDefaults() Config {
	if c.Settings != nil && !lockservice.Fits(c.Service, c.Settings) {
		return c
	}
	if s := c.settings(); s != nil {
		p := c.plan()
		c.Settings, p = s.Defaults(p)
		c.Nodes = p.Nodes
	}
	return c
}

// validateSettings refuses settings of another kind than the run's, and what the
// service's own settings refuse.
func (c Config) validateSettings() error {
	if c.Settings != nil && !lockservice.Fits(c.Service, c.Settings) {
		title, kinds := settingsOwner(c.Settings)
		return fmt.Errorf("settings: %s for the %s service: add --service %s", title, c.Service.Title(), kinds)
	}
	if s := c.settings(); s != nil {
		return s.Validate(c.plan())
	}
	return nil
}

// settingsOwner names settings s and the kinds that take them ("redis",
// "postgres or mariadb").
func settingsOwner(s lockservice.Settings) (title, kinds string) {
	for _, spec := range lockservice.AllSettings() {
		if lockservice.Fits(spec.Kinds[0], s) {
			names := make([]string, len(spec.Kinds))
			for i, n := range spec.Kinds {
				names[i] = string(n)
			}
			return spec.Title, strings.Join(names, " or ")
		}
	}
	return fmt.Sprintf("settings %T", s), "of their kind"
}

// describeServers is how the run's log names the servers once they serve, before
// "serving after".
func describeServers(c Config, version string) string {
	if s := c.settings(); s != nil {
		return s.Describe(c.plan(), version)
	}
	return fmt.Sprintf("%s %s, %d server(s):", c.Service.Title(), version, c.Nodes)
}

// ForRecipe is c for a run of recipe on its own service (c's, else the recipe's),
// as a matrix's row or a suite's run: of the settings given (c's and given), the one
// of the run's kind is kept, the others dropped.
func (c Config) ForRecipe(recipe string, given ...lockservice.Settings) Config {
	c.Recipe = recipe
	if c.Service == "" {
		c.Service = RecipeService(recipe)
	}
	c.Service = kind.Of(c.Service).Name
	mine := c.Settings
	c.Settings = nil
	for _, s := range append([]lockservice.Settings{mine}, given...) {
		if lockservice.Fits(c.Service, s) {
			c.Settings = s
		}
	}
	return c
}

// AsRow is c as a matrix's row, where its kind wants more than its defaults (a
// PostgreSQL row, unless told its nodes, runs a primary and a standby, so that
// failover runs).
func (c Config) AsRow() Config {
	if r, ok := c.settings().(lockservice.RowAdjuster); ok {
		c.Nodes = r.ForRow(c.plan()).Nodes
	}
	return c
}

// Deployments lists the ways c's service may be deployed when c leaves the choice
// open (Redis's topologies: single, replicas, redlock, or the cluster alone for a
// recipe that runs on nothing else), in the order a matrix tries them; c alone
// otherwise.
func (c Config) Deployments() []Config {
	c.Service = kind.Of(c.Service).Name
	d, ok := c.settings().(lockservice.Deployer)
	if !ok {
		return []Config{c}
	}
	var out []Config
	for _, s := range d.Deployments(c.plan()) {
		e := c
		e.Settings = s
		out = append(out, e)
	}
	if len(out) == 0 {
		return []Config{c}
	}
	return out
}

// Deployment names the deployment c's settings pin (Redis's topology), "" when
// they pin none or the kind has one way only.
func (c Config) Deployment() string {
	if d, ok := c.settings().(lockservice.Deployment); ok {
		return d.Deployment()
	}
	return ""
}

// DescribeServers names the run's servers for a person, as a run's description
// lists them ("" for the default service's plain ensemble).
func (c Config) DescribeServers() string {
	if s := c.settings(); s != nil {
		return s.Brief(c.plan())
	}
	return fmt.Sprintf("service %s (%d servers)", c.Service, c.Nodes)
}

// Servers is the number of servers the run has in all: Nodes, and the ones beside
// them (ZooKeeper's observers), one SSH node each.
func (c Config) Servers() int {
	if e, ok := c.settings().(lockservice.Extra); ok {
		return c.Nodes + e.ExtraServers()
	}
	return c.Nodes
}

// timing is the servers' tick and syncLimit, for a violation's cause (zero for a
// kind that has none).
func (c Config) timing() (time.Duration, int) {
	if t, ok := c.settings().(lockservice.Clocked); ok {
		return t.Timing()
	}
	return 0, 0
}

// legacy are the keys a config.json had at its top level before the service's
// settings had their own section; such a file is read with its kind's Legacy. The
// old format is frozen: a new kind adds nothing here.
type legacy struct {
	Observers     json.RawMessage `json:"observers"`
	ZKHome        json.RawMessage `json:"zk_home"`
	Tick          json.RawMessage `json:"tick_ns"`
	InitLimit     json.RawMessage `json:"init_limit"`
	SyncLimit     json.RawMessage `json:"sync_limit"`
	NoForceSync   json.RawMessage `json:"no_force_sync"`
	ServerHeap    json.RawMessage `json:"server_heap"`
	ServerFullJIT json.RawMessage `json:"server_full_jit"`
	Redis         json.RawMessage `json:"redis"`
	DBKeepAlive   json.RawMessage `json:"db_keepalive_ns"`
}

// flat is l as its kind's Legacy reads it: the keys present, by name.
func (l legacy) flat() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range map[string]json.RawMessage{
		"observers": l.Observers, "zk_home": l.ZKHome, "tick_ns": l.Tick, "init_limit": l.InitLimit,
		"sync_limit": l.SyncLimit, "no_force_sync": l.NoForceSync, "server_heap": l.ServerHeap,
		"server_full_jit": l.ServerFullJIT, "redis": l.Redis, "db_keepalive_ns": l.DBKeepAlive,
	} {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// UnmarshalJSON reads config.json strictly (a field a Config does not have is an
// error), its "settings" section as the kind of its "service", and a config.json
// written before that section existed by the kind's Legacy reader.
func (c *Config) UnmarshalJSON(data []byte) error {
	type plain Config // Config's fields without this method
	var aux struct {
		plain
		legacy
		Settings json.RawMessage `json:"settings"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	*c = Config(aux.plain)
	service := kind.Of(c.Service).Name
	spec, ok := lockservice.SettingsOf(service)
	flat := aux.legacy.flat()
	var err error
	switch {
	case len(aux.Settings) > 0 && len(flat) > 0:
		return errors.New("settings: given both as a section and at the top level")
	case len(aux.Settings) > 0 && string(aux.Settings) != "null":
		c.Settings, err = lockservice.DecodeSettings(service, aux.Settings)
	case len(flat) > 0 && ok && spec.Legacy != nil:
		c.Settings, err = spec.Legacy(flat)
	}
	return err
}
