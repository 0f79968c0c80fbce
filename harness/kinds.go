package harness

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// The settings of Config that belong to one kind of service (or to the SQL
// databases, which share theirs): what each is when unset, what it refuses, and how
// the run's log describes the servers. A kind with no entry has no settings of its
// own. This table is the one place in harness that names a kind.

// kindSettings is one group of a kind's own settings.
type kindSettings struct {
	// kinds are the kinds that have these settings.
	kinds []kind.Name
	// set reports whether c sets any of them; refuse is the error when it does for
	// another kind (%s: that kind's title).
	set    func(c Config) bool
	refuse string
	// defaults fills them when unset (nil: nothing to fill).
	defaults func(c Config) Config
	// validate refuses what a run of these kinds cannot do (nil: nothing).
	validate func(c Config) error
	// describe is the run's log line once the servers serve (nil: the generic one).
	describe func(c Config, version string) string
	// section is the kind's own part of lockservice.Config (its Settings), its
	// servers' files under serversDir.
	section func(c Config, serversDir string) any
	// clear drops these settings, for a run of another kind (a matrix's row of
	// another service than its flags name).
	clear func(c Config) Config
	// forRecipe adjusts a run of these kinds whose service the recipe chose, where
	// the kind wants more than its defaults (nil: nothing).
	forRecipe func(c Config) Config
	// deployments lists the ways a run of these kinds may be deployed when c leaves
	// the choice open, in the order to try them (nil, or none: c's own only).
	deployments func(c Config) []Config
	// brief names the servers in a run's description (DescribeServers; nil: the
	// generic one).
	brief func(c Config) string
}

// settingGroups lists every kind's settings.
var settingGroups = []kindSettings{
	{
		kinds:    []kind.Name{kind.ZooKeeper},
		set:      func(c Config) bool { return c.Observers > 0 },
		refuse:   "observers: ZooKeeper observers; the %s service has none (drop --observers, or run --service zookeeper)",
		clear:    func(c Config) Config { c.Observers = 0; return c },
		validate: validateZooKeeper,
		section: func(c Config, serversDir string) any {
			return zookeeper.EnsembleConfig{
				Nodes: c.Nodes, Observers: c.Observers, ZKHome: c.ZKHome, Dir: serversDir,
				Tick: c.Tick, InitLimit: c.InitLimit, SyncLimit: c.SyncLimit, NoForceSync: c.NoForceSync,
				Heap: c.ServerHeap, FullJIT: c.ServerFullJIT, MaxSessionTimeout: c.MaxSessionTimeout(),
			}
		},
		brief: func(c Config) string {
			if c.Observers > 0 {
				return fmt.Sprintf("%d servers and %d observer(s)", c.Nodes, c.Observers)
			}
			return "" // the default service, as every run's description had it
		},
		describe: func(c Config, _ string) string {
			if c.Observers > 0 {
				return fmt.Sprintf("ensemble of %d and %d observer(s)", c.Nodes, c.Observers)
			}
			return fmt.Sprintf("ensemble of %d", c.Nodes)
		},
	},
	{
		kinds:  []kind.Name{kind.Redis},
		set:    func(c Config) bool { return c.Redis != (redis.RedisSettings{}) },
		refuse: "redis-topology, redis-persistence: Redis settings for the %s service: add --service redis",
		clear:  func(c Config) Config { c.Redis = redis.RedisSettings{}; return c },
		deployments: func(c Config) []Config {
			if c.Redis.Topology != "" {
				return nil
			}
			var out []Config
			for _, t := range []redis.RedisTopology{redis.RedisSingle, redis.RedisReplicas, redis.RedisRedlock} {
				d := c
				d.Redis.Topology = t
				out = append(out, d)
			}
			return out
		},
		defaults: func(c Config) Config {
			if c.Redis.Topology == "" && redlockRecipe(c.Recipe) {
				c.Redis.Topology = redis.RedisRedlock // the one topology RedLock runs on
			}
			c.Redis = c.Redis.WithDefaults()
			fill(&c.Nodes, c.Redis.DefaultNodes())
			return c
		},
		validate: Config.validateRedis,
		section: func(c Config, serversDir string) any {
			return redis.RedisConfig{RedisSettings: c.Redis, Nodes: c.Nodes, Dir: serversDir}
		},
		brief: func(c Config) string {
			r := c.Redis.WithDefaults()
			return fmt.Sprintf("service redis (%s topology of %d, persistence %s)", r.Topology, c.Nodes, r.Persistence)
		},
		describe: func(c Config, version string) string {
			return fmt.Sprintf("redis %s, %s topology of %d, persistence %s:", version, c.Redis.Topology, c.Nodes, c.Redis.Persistence)
		},
	},
	{
		kinds:  []kind.Name{kind.Postgres, kind.MariaDB},
		set:    func(c Config) bool { return c.DBKeepAlive != 0 },
		refuse: "db-keepalive: sets a database server's TCP keepalive; the %s service has none (add --service postgres or mariadb)",
		clear:  func(c Config) Config { c.DBKeepAlive = 0; return c },
		forRecipe: func(c Config) Config {
			if c.Service == kind.Postgres && c.Nodes == 0 {
				c.Nodes = 2 // a primary and a standby, so that failover runs
			}
			return c
		},
		validate: Config.validateDatabase,
		section: func(c Config, _ string) any {
			if c.Service == kind.MariaDB {
				return sqldb.MariaDBConfig{Nodes: c.Nodes, KeepAlive: c.DBKeepAlive}
			}
			return sqldb.PostgresConfig{Standby: c.Nodes == 2, KeepAlive: c.DBKeepAlive}
		},
	},
}

// settingsOf returns the settings of kind n, nil for a kind with none.
func settingsOf(n kind.Name) *kindSettings {
	for i, s := range settingGroups {
		if slices.Contains(s.kinds, n) {
			return &settingGroups[i]
		}
	}
	return nil
}

// describeServers is how the run's log names the servers once they serve, before
// "serving after".
func describeServers(c Config, version string) string {
	if s := settingsOf(c.Service); s != nil && s.describe != nil {
		return s.describe(c, version)
	}
	return fmt.Sprintf("%s %s, %d server(s):", serviceTitle(c.Service), version, c.Nodes)
}

// ForRecipe is c for a run of recipe on its own service (c's, else the recipe's),
// as a matrix's row: the settings c gives for another kind are dropped, and the
// row's kind adjusts what it wants (a PostgreSQL row, unless told its nodes, runs a
// primary and a standby).
func (c Config) ForRecipe(recipe string) Config {
	c.Recipe = recipe
	if c.Service == "" {
		c.Service = RecipeService(recipe)
	}
	c.Service = kind.Of(c.Service).Name
	for _, s := range settingGroups {
		if !slices.Contains(s.kinds, c.Service) && s.clear != nil {
			c = s.clear(c)
		}
	}
	if s := settingsOf(c.Service); s != nil && s.forRecipe != nil {
		c = s.forRecipe(c)
	}
	return c
}

// Deployments lists the ways c's service may be deployed when c leaves the choice
// open (Redis's topologies: single, replicas, redlock), in the order a matrix tries
// them; c alone otherwise.
func (c Config) Deployments() []Config {
	if s := settingsOf(kind.Of(c.Service).Name); s != nil && s.deployments != nil {
		if out := s.deployments(c); len(out) > 0 {
			return out
		}
	}
	return []Config{c}
}

// DescribeServers names the run's servers for a person, as a run's description
// lists them ("" for the default service's plain ensemble).
func (c Config) DescribeServers() string {
	if s := settingsOf(c.Service); s != nil && s.brief != nil {
		return s.brief(c)
	}
	return fmt.Sprintf("service %s (%d servers)", c.Service, c.Nodes)
}

// validateZooKeeper refuses observers on an ensemble the tool does not start.
func validateZooKeeper(c Config) error {
	if c.Observers > 0 && c.Connect != "" {
		return errors.New("observers: an existing ensemble (connect) has the observers its owners gave it; --observers is for the ensembles zlockcheck starts")
	}
	return nil
}

// validateDatabase refuses what a run on PostgreSQL or MariaDB cannot do (yet).
func (c Config) validateDatabase() error {
	title := serviceTitle(c.Service)
	switch {
	case c.DBKeepAlive < 0:
		return fmt.Errorf("db-keepalive: %s is negative (0 leaves the kernel's keepalive)", c.DBKeepAlive)
	case c.Connect != "":
		return fmt.Errorf("connect: testing an existing %s is not built yet (--service %s starts its own servers)", title, c.Service)
	case c.SSH != nil:
		return fmt.Errorf("ssh-nodes: %s on SSH nodes is not built yet", title)
	case len(c.BaselineArgv) > 0:
		return fmt.Errorf("baseline-processes: there is no plain %s client loop as processes (--baseline runs it as goroutines)", title)
	case c.Service == kind.Postgres && c.Nodes > 2:
		return fmt.Errorf("nodes: PostgreSQL runs a primary (--nodes 1) or a primary and a streaming standby (--nodes 2), not %d servers", c.Nodes)
	case c.Service == kind.Postgres && c.Nodes < 2 && slices.Contains(c.Nemesis, nemesis.ClassFailover):
		return errors.New("nemesis failover: promotes the standby: it needs --nodes 2 (a primary and a streaming standby)")
	}
	return nil
}

// validateRedis refuses what a run on Redis cannot do (yet).
func (c Config) validateRedis() error {
	switch {
	case c.Connect != "":
		return errors.New("connect: testing an existing Redis is not built yet (--service redis starts its own instances)")
	case c.SSH != nil:
		return errors.New("ssh-nodes: Redis on SSH nodes is not built yet")
	case c.Workload.Fenced && redlockRecipe(c.Recipe):
		return fmt.Errorf("fenced: recipe %s has no fencing token (RedLock gives none)", c.Recipe)
	}
	if err := c.Redis.Validate(c.Nodes); err != nil {
		return err
	}
	if err := c.redisTopologyFits(); err != nil {
		return err
	}
	if len(c.BaselineArgv) > 0 {
		return errors.New("baseline-processes: there is no plain Redis client loop as processes yet (--baseline runs it as goroutines)")
	}
	for _, cl := range c.Nemesis {
		if cl == nemesis.ClassFailover && c.Redis.WithDefaults().Topology != redis.RedisReplicas {
			return fmt.Errorf("nemesis failover: promotes a replica: it needs --redis-topology replicas, not %s", c.Redis.WithDefaults().Topology)
		}
	}
	return nil
}

// redisTopologyFits refuses a catalogue recipe on a topology it cannot use: RedLock
// needs independent instances; a single-instance lock uses one primary.
func (c Config) redisTopologyFits() error {
	if RecipeService(c.Recipe) != kind.Redis {
		return nil
	}
	redlock := c.Redis.WithDefaults().Topology == redis.RedisRedlock
	switch {
	case redlockRecipe(c.Recipe) && !redlock:
		return fmt.Errorf("recipe %s is RedLock over independent instances: run it with --redis-topology redlock --nodes 3 (or 5)", c.Recipe)
	case !redlockRecipe(c.Recipe) && redlock:
		return fmt.Errorf("recipe %s locks one Redis primary: run it with --redis-topology single or replicas, not redlock", c.Recipe)
	}
	return nil
}
