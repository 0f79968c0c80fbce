package harness

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// redisConfig is a valid run of an exec worker on Redis, before Defaults.
func redisConfig() Config {
	return Config{Recipe: "exec", WorkerArgv: []string{"w"}, Service: kind.Redis}
}

func TestServiceDefaults(t *testing.T) {
	zk := Config{Recipe: "gozk", WorkerArgv: []string{"w"}}.Defaults()
	if zk.Service != kind.ZooKeeper || zk.Nodes != 3 || zk.Settings != zookeeper.DefaultSettings() {
		t.Errorf("a ZooKeeper recipe's run: service %q, %d nodes, settings %+v", zk.Service, zk.Nodes, zk.Settings)
	}
	single := redisConfig().Defaults()
	want := redis.RedisSettings{Topology: redis.RedisSingle, Persistence: redis.PersistNone}
	if single.Settings != want || single.Nodes != 1 {
		t.Errorf("redis defaults: %+v, %d nodes; want %+v, 1 node", single.Settings, single.Nodes, want)
	}
	c := redisConfig()
	c.Settings = redis.RedisSettings{Topology: redis.RedisRedlock}
	if n := c.Defaults().Nodes; n != 3 {
		t.Errorf("redlock's default nodes: %d", n)
	}
	c.Nodes = 5
	if n := c.Defaults().Nodes; n != 5 {
		t.Errorf("redlock with 5 nodes asked for: %d", n)
	}
	sc := single.service("/srv")
	if rc, _ := sc.Settings.(redis.RedisConfig); sc.Kind != kind.Redis || rc.RedisSettings != want || rc.Nodes != 1 || rc.Dir != "/srv" {
		t.Errorf("the service's configuration: %+v", sc)
	}
	for name, cfg := range map[string]Config{"zookeeper": zk, "redis": single} {
		data, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hasRedis := strings.Contains(string(data), `"settings":{"topology":"single","persistence":"none"}`)
		if !strings.Contains(string(data), `"service":"`+name+`"`) || hasRedis != (name == "redis") {
			t.Errorf("%s run's config.json: %s", name, data)
		}
		var back Config
		if err := json.Unmarshal(data, &back); err != nil || back.Settings != cfg.Settings {
			t.Errorf("%s run's config.json read back: %+v, %v; want %+v", name, back.Settings, err, cfg.Settings)
		}
	}
}

func TestValidateRefusesWhatRedisCannotDo(t *testing.T) {
	cases := map[string]func(*Config){
		"--connect names 2 Redis instances, --nodes says 1": func(c *Config) { c.Connect, c.Nodes = "10.0.0.1:6379,10.0.0.2", 1 },
		"acts on the servers":                               func(c *Config) { c.Connect, c.Nemesis = "10.0.0.1:6379", []nemesis.Class{nemesis.ClassPause} },
		"ssh-nodes": func(c *Config) {
			c.SSH, c.Connect = &lockservice.SSHConfig{Nodes: []string{"a"}}, "10.0.0.1:6379"
		},
		"single topology":   func(c *Config) { c.Nodes = 3 },
		"RedLock wants":     func(c *Config) { c.Settings, c.Nodes = redis.RedisSettings{Topology: redis.RedisRedlock}, 2 },
		"redis-persistence": func(c *Config) { c.Settings = redis.RedisSettings{Persistence: "rdb"} },
		"plain Redis":       func(c *Config) { c.BaselineArgv = []string{"plain-loop"} },
		"no sessions":       func(c *Config) { c.Nemesis = []nemesis.Class{nemesis.ClassKill, nemesis.ClassSessionExpire} },
		"partition: cuts servers off from each other: needs at least 2 servers, the run has 1": func(c *Config) {
			c.Nemesis = []nemesis.Class{nemesis.ClassPause, nemesis.ClassPartition}
		},
		"ZooKeeper recipe": func(c *Config) { c.Recipe = "gozk" },
		"want zookeeper, redis, postgres": func(c *Config) {
			c.Service = "consul"
		},
	}
	if err := redisConfig().Defaults().Validate(); err != nil {
		t.Fatalf("a valid Redis run: %v", err)
	}
	ok := redisConfig()
	ok.Nemesis = []nemesis.Class{nemesis.ClassKill, nemesis.ClassPause, nemesis.ClassClientPause,
		nemesis.ClassClientServerPartition, nemesis.ClassReplyLoss}
	if err := ok.Defaults().Validate(); err != nil {
		t.Errorf("kill, pause, client-pause, client-server-partition and reply-loss on one Redis instance: %v", err)
	}
	ok.Nemesis = append(ok.Nemesis, nemesis.ClassPartition)
	ok.Settings = redis.RedisSettings{Topology: redis.RedisReplicas}
	if err := ok.Defaults().Validate(); err != nil {
		t.Errorf("the same and partition on three Redis instances: %v", err)
	}
	onNodes := redisConfig()
	onNodes.Settings, onNodes.SSH = redis.RedisSettings{Topology: redis.RedisRedlock}, &lockservice.SSHConfig{Nodes: []string{"a", "b", "c"}}
	if err := onNodes.Defaults().Validate(); err != nil || onNodes.Defaults().Nodes != 3 {
		t.Errorf("RedLock on three SSH nodes: %v, %d instances", err, onNodes.Defaults().Nodes)
	}
	counter := redisConfig()
	counter.Workload.Kind, counter.Workload.Fenced = workloads.Counter, true
	if err := counter.Defaults().Validate(); err != nil {
		t.Errorf("a fenced counter on Redis: %v", err)
	}
	for want, change := range cases {
		c := redisConfig()
		change(&c)
		if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error about %q, got %v", want, err)
		}
	}
	zk := Config{Recipe: "exec", WorkerArgv: []string{"w"}, Settings: redis.RedisSettings{Topology: redis.RedisRedlock}}
	if err := zk.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "--service redis") {
		t.Errorf("Redis settings on ZooKeeper: %v", err)
	}
}

func TestRedisRecipesNeedRedis(t *testing.T) {
	for _, r := range recipes.Catalog() {
		if _, err := kind.Parse(string(RecipeService(r.Name))); err != nil {
			t.Errorf("recipe %s: its service is no kind the harness starts: %v", r.Name, err)
		}
	}
	if s := RecipeService("redsync"); s != kind.Redis {
		t.Errorf("redsync's service: %q", s)
	}
	if s := RecipeService("gozk"); s != kind.ZooKeeper {
		t.Errorf("gozk's service: %q", s)
	}
	if s := RecipeService("exec"); s != "" {
		t.Errorf("exec's service: %q", s)
	}
	cases := []struct {
		recipe string
		change func(*Config)
		want   string // "" for valid
	}{
		{"redis-lock", func(*Config) {}, ""},
		{"redis-lock", func(c *Config) { c.Service = kind.ZooKeeper }, "--service redis"},
		{"redis-lock", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisRedlock} }, "not redlock"},
		{"redis-lock", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisReplicas} }, ""},
		{"redsync", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisRedlock} }, ""},
		{"redsync", func(*Config) {}, ""}, // the one topology it runs on, by default
		{"redsync", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisSingle} }, "--redis-topology redlock"},
		{"redsync", func(c *Config) {
			c.Settings, c.Workload.Fenced = redis.RedisSettings{Topology: redis.RedisRedlock}, true
		}, "no fencing token"},
		{"redsync-one-cluster", func(*Config) {}, ""}, // the cluster, by default
		{"redsync-one-cluster", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisRedlock} }, "--redis-topology cluster, not redlock"},
		{"redsync-one-cluster", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisSingle} }, "--redis-topology cluster, not single"},
	}
	for _, c := range cases {
		cfg := Config{Recipe: c.recipe, WorkerArgv: []string{"w"}}
		c.change(&cfg)
		err := cfg.Defaults().Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s %+v: got %v, want %q", c.recipe, cfg.Settings, err, c.want)
		}
	}
}

// TestValidateDatabases: each database recipe runs on its database with the classes
// it can have, and what it cannot have is refused with the reason.
func TestValidateDatabases(t *testing.T) {
	cases := []struct {
		recipe string
		change func(*Config)
		want   string // "" for valid
	}{
		{"pg-table", func(*Config) {}, ""},
		{"pg-advisory", func(c *Config) { c.Workload.Kind = workloads.Reentrant }, ""},
		{"mariadb-getlock", func(*Config) {}, ""},
		{"pg-table", func(c *Config) { c.Service = kind.MariaDB }, "PostgreSQL recipe"},
		{"pg-table", func(c *Config) { c.Service = kind.Redis }, "--service postgres"},
		{"redis-lock", func(c *Config) { c.Service = kind.Postgres }, "--service redis"},
		{"gozk", func(c *Config) { c.Service = kind.MariaDB }, "the MariaDB recipes: mariadb-getlock"},
		{"pg-table", func(c *Config) { c.Nemesis = []nemesis.Class{nemesis.ClassPartition} }, "needs at least 2 servers, the run has 1 (--nodes)"},
		{"pg-table", func(c *Config) {
			c.Nodes = 2
			c.Nemesis = []nemesis.Class{nemesis.ClassKill, nemesis.ClassRestart, nemesis.ClassPause, nemesis.ClassPartition,
				nemesis.ClassClientPause, nemesis.ClassClientPartition, nemesis.ClassClientKill, nemesis.ClassClientServerPartition,
				nemesis.ClassReplyLoss, nemesis.ClassConnectionKill}
		}, ""},
		{"pg-table", func(c *Config) { c.Nemesis = []nemesis.Class{nemesis.ClassSessionExpire} }, "connection-kill"},
		{"pg-table", func(c *Config) { c.Nemesis = []nemesis.Class{nemesis.ClassClockJump} }, "PostgreSQL cannot"},
		{"pg-table", func(c *Config) { c.Nemesis = []nemesis.Class{nemesis.ClassFailover} }, "--nodes 2"},
		{"pg-table", func(c *Config) { c.Nodes, c.Nemesis = 2, []nemesis.Class{nemesis.ClassFailover} }, ""},
		{"pg-table", func(c *Config) { c.Nodes = 3 }, "not 3 servers"},
		{"mariadb-getlock", func(c *Config) { c.Nemesis = []nemesis.Class{nemesis.ClassFailover} }, "nothing to fail over to"},
		{"mariadb-getlock", func(c *Config) { c.Connect = "10.1.2.3:3306" }, "not a go-sql-driver DSN"},
		{"mariadb-getlock", func(c *Config) { c.Connect = "team@tcp(10.1.2.3:3306)/app,team@tcp(10.1.2.4)/app" }, ""},
		{"mariadb-getlock", func(c *Config) { c.Connect, c.Nodes = "team@tcp(10.1.2.3:3306)/app", 2 }, "--nodes says 2"},
		{"pg-advisory", func(c *Config) { c.SSH = &lockservice.SSHConfig{Nodes: []string{"a"}} }, ""},
		{"pg-advisory", func(c *Config) {
			c.SSH, c.Nemesis = &lockservice.SSHConfig{Nodes: []string{"a", "b"}}, []nemesis.Class{nemesis.ClassFailover}
		}, ""},
		{"pg-advisory", func(c *Config) {
			c.SSH = &lockservice.SSHConfig{Nodes: []string{"a"}, Config: sshnode.Config{User: "team"}}
		}, "needs --ssh-user root"},
		{"pg-advisory", func(c *Config) {
			c.SSH, c.Connect = &lockservice.SSHConfig{Nodes: []string{"a"}}, "postgres://team@db/app"
		}, "give one or the other"},
		{"pg-advisory", func(c *Config) { c.SSH = &lockservice.SSHConfig{Nodes: []string{"a", "b", "c"}} }, "not 3 servers"},
		{"mariadb-getlock", func(c *Config) { c.SSH = &lockservice.SSHConfig{Nodes: []string{"a", "b"}} }, ""},
		{"pg-table", func(c *Config) { c.Settings = redis.RedisSettings{Topology: redis.RedisSingle} }, "add --service redis"},
	}
	for _, c := range cases {
		cfg := Config{Recipe: c.recipe, WorkerArgv: []string{"w"}}
		c.change(&cfg)
		err := cfg.Defaults().Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s %+v: got %v, want %q", c.recipe, cfg, err, c.want)
		}
	}
	d := Config{Recipe: "pg-table", WorkerArgv: []string{"w"}}.Defaults()
	if d.Service != kind.Postgres || d.Nodes != 1 {
		t.Errorf("pg-table's defaults: service %s, %d nodes", d.Service, d.Nodes)
	}
	if sc := (Config{Recipe: "pg-table", WorkerArgv: []string{"w"}, Nodes: 2}).Defaults().service("/srv"); !sc.Settings.(sqldb.PostgresConfig).Standby || sc.Dir != "/srv" {
		t.Errorf("two PostgreSQL servers are a primary and a standby: %+v", sc)
	}
}

// TestLockQuorum: the lock of a recipe that keeps it in a majority of keys of one
// cluster (redsync-one-cluster) names those keys, made from the run's lock path,
// for its readers, and its first key, whose primary holds a majority, is the key
// the service is told; any other recipe's lock is its path alone.
func TestLockQuorum(t *testing.T) {
	for _, c := range []struct {
		recipe string
		quorum []string
		key    string
	}{
		{"redsync-one-cluster", []string{"{lock1}/zlc/abc123/l0", "{lock2}/zlc/abc123/l0", "{lock4}/zlc/abc123/l0"}, "{lock1}/zlc/abc123/l0"},
		{"redsync", nil, "/zlc/abc123/l0"},
	} {
		cfg := Config{Recipe: c.recipe, RunID: "abc123"}
		cfg.Workload.Key = "l0"
		r := &runner{cfg: cfg, lockPath: cfg.lockPath(), lockQuorum: cfg.lockQuorum()}
		if l := r.lock(); l.Path != "/zlc/abc123/l0" || !slices.Equal(l.Quorum, c.quorum) || r.lockKey() != c.key {
			t.Errorf("%s: lock %+v, key %s; want the quorum %q, the key %s", c.recipe, l, r.lockKey(), c.quorum, c.key)
		}
	}
}

// TestRunnableKeepsWhatTheRunTakes: a setup loses the classes the run refuses and
// keeps the others; one left with none is refused with the run's reason.
func TestRunnableKeepsWhatTheRunTakes(t *testing.T) {
	one := redisConfig().Defaults()
	server := nemesis.Setup{Name: "server", Classes: []nemesis.Class{nemesis.ClassKill, nemesis.ClassPause, nemesis.ClassPartition}}
	got, err := one.Runnable(server)
	if err != nil || !slices.Equal(got.Classes, []nemesis.Class{nemesis.ClassKill, nemesis.ClassPause}) || got.Name != "server" {
		t.Errorf("server faults on one Redis instance: %v, %v; want kill and pause", got.Classes, err)
	}
	three := redisConfig()
	three.Settings = redis.RedisSettings{Topology: redis.RedisReplicas}
	if got, err := three.Defaults().Runnable(server); err != nil || len(got.Classes) != 3 {
		t.Errorf("server faults on three instances: %v, %v; want all three", got.Classes, err)
	}
	if _, err := one.Runnable(nemesis.Setup{Classes: []nemesis.Class{nemesis.ClassPartition, nemesis.ClassSessionExpire}}); err == nil ||
		!strings.Contains(err.Error(), "needs at least 2 servers") {
		t.Errorf("only refused classes: %v, want the first refusal", err)
	}
	if _, err := one.Runnable(nemesis.Setup{Name: "none"}); err != nil {
		t.Errorf("no faults on one instance: %v", err)
	}
}
