package harness

import (
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

// The abilities each built-in kind's service has of those the run asks for
// (service.go): held to the kinds here, so that the run's own code names none.
var (
	_ yardstick     = (*zookeeper.Ensemble)(nil)
	_ rootMaker     = (*zookeeper.Ensemble)(nil)
	_ lockInspector = (*zookeeper.Ensemble)(nil)
	_ counterStore  = (*zookeeper.Ensemble)(nil)
	_ herdSampler   = (*zookeeper.Ensemble)(nil)

	_ lockInspector = (*redis.Redis)(nil)
	_ counterStore  = (*redis.Redis)(nil)
	_ yardstick     = (*redis.Redis)(nil)

	_ lockInspector = (*sqldb.Postgres)(nil)
	_ counterStore  = (*sqldb.Postgres)(nil)
	_ yardstick     = (*sqldb.Postgres)(nil)
	_ lockInspector = (*sqldb.MariaDB)(nil)
	_ yardstick     = (*sqldb.MariaDB)(nil)
)
var _ sessionFreeEntries = (*sqldb.PostgresLock)(nil)
