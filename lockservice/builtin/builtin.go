// Package builtin links the kinds of lock service zlockcheck ships with into a
// program: importing it registers each kind (its package's init registers its
// start, sweep and settings with lockservice), as a program imports the
// database/sql drivers it uses. A new kind adds its one line here.
package builtin

import (
	_ "github.com/zlockcheck/zlockcheck/lockservice/etcd"      // etcd
	_ "github.com/zlockcheck/zlockcheck/lockservice/redis"     // Redis
	_ "github.com/zlockcheck/zlockcheck/lockservice/sqldb"     // PostgreSQL and MariaDB
	_ "github.com/zlockcheck/zlockcheck/lockservice/zookeeper" // ZooKeeper
)
