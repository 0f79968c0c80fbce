package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/report"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// What a run asks of its lock service beyond lockservice.Service, each declared here
// where it is used. A service without one runs without the watch or record that needs
// it and says so in the run's log; it is never given a wrong number.

// rootMaker makes the root a run on a deployment it does not manage writes under
// (--connect's chroot), and returns how to remove it.
type rootMaker interface {
	PrepareRoot(ctx context.Context, sessionTimeout time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error)
}

// lockInspector reads the lock's entries and which sessions live: the liveness
// verdict and the orphan watch attribute each entry to a worker.
type lockInspector interface {
	OpenLock(ctx context.Context, sessionTimeout time.Duration) (lockservice.LockReader, error)
	LiveSessions(ctx context.Context) map[string]bool
}

// counterStore keeps the counter workload's shared value.
type counterStore interface {
	MakeCounter(ctx context.Context, sessionTimeout time.Duration, path string) error
	ReadCounter(ctx context.Context, sessionTimeout time.Duration, path string) (int64, error)
}

// herdSampler samples the servers' watches and counters for the herd verdict.
type herdSampler interface {
	HerdSample(ctx context.Context, at int64, lockPath string, logf func(string, ...any)) herd.Sample
}

// yardstick runs the plain client loop a run's overhead is measured against
// (--baseline, and its warm-up).
type yardstick interface {
	PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error)
}

var (
	_ yardstick     = (*lockservice.Ensemble)(nil)
	_ rootMaker     = (*lockservice.Ensemble)(nil)
	_ lockInspector = (*lockservice.Ensemble)(nil)
	_ counterStore  = (*lockservice.Ensemble)(nil)
	_ herdSampler   = (*lockservice.Ensemble)(nil)

	_ lockInspector = (*lockservice.Redis)(nil)
	_ counterStore  = (*lockservice.Redis)(nil)
	_ yardstick     = (*lockservice.Redis)(nil)

	_ lockInspector = (*lockservice.Postgres)(nil)
	_ counterStore  = (*lockservice.Postgres)(nil)
	_ yardstick     = (*lockservice.Postgres)(nil)
	_ lockInspector = (*lockservice.MariaDB)(nil)
	_ yardstick     = (*lockservice.MariaDB)(nil)
)

// The service a run starts is its Config.Service; a recipe of the catalogue works
// with one kind of service, and a run refuses a recipe of another kind, and what the
// service cannot do yet, before it makes anything.

// RecipeService is the kind of service a recipe works with (its catalogue entry's
// Service: zookeeper when it names none), "" for a recipe not in the catalogue (exec:
// whatever the run says).
func RecipeService(name string) lockservice.Kind {
	r, err := recipes.Find(name)
	switch {
	case err != nil:
		return ""
	case r.Service == "":
		return lockservice.KindZooKeeper
	}
	return lockservice.Kind(r.Service)
}

// RecipeSessionLock reports whether a recipe of the catalogue locks in the holder's
// server session (recipes.Entry.SessionLock).
func RecipeSessionLock(name string) bool {
	r, err := recipes.Find(name)
	return err == nil && r.SessionLock
}

// RecipeDoes reports whether a recipe of the catalogue does workload kind k (false
// for one not in the catalogue).
func RecipeDoes(name string, k workloads.Kind) bool {
	r, err := recipes.Find(name)
	return err == nil && r.Supports(k)
}

// redlockRecipe reports whether a recipe is RedLock over independent instances
// (redsync and its mutants): it needs the redlock topology and has no fencing token.
func redlockRecipe(name string) bool {
	return name == "redsync" || strings.HasPrefix(name, "mutant-redlock")
}

// serviceDefaults fills the service (the recipe's, else zookeeper) and, for Redis,
// its settings and, when unset, its number of instances; a database has one server
// unless told otherwise.
func (c Config) serviceDefaults() Config {
	if c.Service == "" {
		c.Service = RecipeService(c.Recipe)
	}
	if c.Service == "" {
		c.Service = lockservice.KindZooKeeper
	}
	switch c.Service {
	case lockservice.KindRedis:
		c.Redis = c.Redis.WithDefaults()
		fill(&c.Nodes, c.Redis.DefaultNodes())
	case lockservice.KindPostgres, lockservice.KindMariaDB:
		fill(&c.Nodes, 1)
	}
	return c
}

// serviceTitle is a kind of service as the messages name it.
func serviceTitle(k lockservice.Kind) string { return report.ServiceTitle(string(k)) }

// validateService refuses a service the tool does not know, a recipe of another
// service, settings of another service, and the fault classes the service cannot
// have.
func (c Config) validateService() error {
	kind := c.Service
	if kind == "" {
		kind = lockservice.KindZooKeeper
	}
	if want := RecipeService(c.Recipe); want != "" && want != kind {
		return fmt.Errorf("recipe %s is a %s recipe: it cannot run with --service %s; run it with --service %s (the %s recipes: %s)",
			c.Recipe, serviceTitle(want), kind, want, serviceTitle(kind), strings.Join(recipesOf(kind), ", "))
	}
	if kind != lockservice.KindRedis && c.Redis != (lockservice.RedisSettings{}) {
		return fmt.Errorf("redis-topology, redis-persistence: Redis settings (%+v) for the %s service: add --service redis", c.Redis, kind)
	}
	if c.DBKeepAlive != 0 && kind != lockservice.KindPostgres && kind != lockservice.KindMariaDB {
		return fmt.Errorf("db-keepalive: sets a database server's TCP keepalive; the %s service has none (add --service postgres or mariadb)", serviceTitle(kind))
	}
	if c.Observers > 0 && kind != lockservice.KindZooKeeper {
		return fmt.Errorf("observers: ZooKeeper observers; the %s service has none (drop --observers, or run --service zookeeper)", serviceTitle(kind))
	}
	if c.Observers > 0 && c.Connect != "" {
		return errors.New("observers: an existing ensemble (connect) has the observers its owners gave it; --observers is for the ensembles zlockcheck starts")
	}
	if c.DBKeepAlive < 0 {
		return fmt.Errorf("db-keepalive: %s is negative (0 leaves the kernel's keepalive)", c.DBKeepAlive)
	}
	for _, cl := range c.Nemesis {
		if err := classRefused(kind, cl); err != nil {
			return fmt.Errorf("nemesis %s: %w", cl, err)
		}
	}
	switch kind {
	case lockservice.KindZooKeeper:
		return nil
	case lockservice.KindRedis:
		return c.validateRedis()
	case lockservice.KindPostgres, lockservice.KindMariaDB:
		return c.validateDatabase()
	}
	return fmt.Errorf("service: want zookeeper, redis, postgres or mariadb, got %q", c.Service)
}

// classRefused says why a service cannot have a fault class (nil when it can): the
// classes made for Redis act on Redis and the databases (connection-kill ends a
// session from the server's side; failover promotes a replica or standby), clock-jump
// on Redis only; session-expire on ZooKeeper only.
func classRefused(kind lockservice.Kind, cl nemesis.Class) error {
	switch {
	case kind == lockservice.KindZooKeeper && cl.RedisOnly():
		return errors.New("acts on Redis instances and database servers only (--service redis, postgres or mariadb)")
	case kind == lockservice.KindZooKeeper:
		return nil
	case cl == nemesis.ClassSessionExpire:
		return fmt.Errorf("%s has no sessions to expire (connection-kill, which ends the worker's connection from the server's side, is its analogue)", serviceTitle(kind))
	case cl == nemesis.ClassClockJump && kind != lockservice.KindRedis:
		return fmt.Errorf("jumps a Redis instance's clock as its keys' expiries see it; it is not built for %s", serviceTitle(kind))
	case cl == nemesis.ClassFailover && kind == lockservice.KindMariaDB:
		return errors.New("MariaDB's servers here are independent (no replication): there is nothing to fail over to")
	}
	return nil
}

// validateDatabase refuses what a run on PostgreSQL or MariaDB cannot do (yet).
func (c Config) validateDatabase() error {
	title := serviceTitle(c.Service)
	switch {
	case c.Connect != "":
		return fmt.Errorf("connect: testing an existing %s is not built yet (--service %s starts its own servers)", title, c.Service)
	case c.SSH != nil:
		return fmt.Errorf("ssh-nodes: %s on SSH nodes is not built yet", title)
	case len(c.BaselineArgv) > 0:
		return fmt.Errorf("baseline-processes: there is no plain %s client loop as processes (--baseline runs it as goroutines)", title)
	case c.Service == lockservice.KindPostgres && c.Nodes > 2:
		return fmt.Errorf("nodes: PostgreSQL runs a primary (--nodes 1) or a primary and a streaming standby (--nodes 2), not %d servers", c.Nodes)
	case c.Service == lockservice.KindPostgres && c.Nodes < 2 && slices.Contains(c.Nemesis, nemesis.ClassFailover):
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
		if cl == nemesis.ClassFailover && c.Redis.WithDefaults().Topology != lockservice.RedisReplicas {
			return fmt.Errorf("nemesis failover: promotes a replica: it needs --redis-topology replicas, not %s", c.Redis.WithDefaults().Topology)
		}
	}
	return nil
}

// redisTopologyFits refuses a catalogue recipe on a topology it cannot use: RedLock
// needs independent instances; a single-instance lock uses one primary.
func (c Config) redisTopologyFits() error {
	if RecipeService(c.Recipe) != lockservice.KindRedis {
		return nil
	}
	redlock := c.Redis.WithDefaults().Topology == lockservice.RedisRedlock
	switch {
	case redlockRecipe(c.Recipe) && !redlock:
		return fmt.Errorf("recipe %s is RedLock over independent instances: run it with --redis-topology redlock --nodes 3 (or 5)", c.Recipe)
	case !redlockRecipe(c.Recipe) && redlock:
		return fmt.Errorf("recipe %s locks one Redis primary: run it with --redis-topology single or replicas, not redlock", c.Recipe)
	}
	return nil
}

// recipesOf lists the catalogue's recipes of a kind of service, mutants included.
func recipesOf(kind lockservice.Kind) []string {
	var out []string
	for _, r := range recipes.Catalog() {
		if RecipeService(r.Name) == kind {
			out = append(out, r.Name)
		}
	}
	return out
}
