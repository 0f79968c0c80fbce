// Package node carries the Node workers of libraries installed from the npm registry
// inside the zlockcheck binary: their pins (package.json with exact versions, and the
// package-lock.json npm made of it), the one implementation of the worker protocol
// they share (zlcworker.js), their ioredis client made in one place (redisclient.js)
// and a worker per library (redlock_worker.js for @sesamecare-oss/redlock,
// redis_semaphore_worker.js for redis-semaphore's Mutex, etcd3_worker.js for
// etcd3's Lock). Package recipes installs the
// pins with npm ci into the cache (internal/npm), unpacks the scripts there beside a
// link to the installed node_modules, and runs a worker with node;
// `zlockcheck fetch` installs the pins beforehand.
package node

import (
	"embed"
	"io/fs"

	"github.com/zlockcheck/zlockcheck/internal/npm"
)

//go:embed package.json
var packageJSON []byte

//go:embed package-lock.json
var packageLock []byte

// The workers and the protocol module; the test stays in the checkout.
//
//go:embed zlcworker.js redisclient.js redlock_worker.js redis_semaphore_worker.js etcd3_worker.js
var files embed.FS

// Files are the workers' scripts, which run side by side (each requires
// ./zlcworker).
func Files() fs.FS { return files }

// Lock is the libraries the workers require, pinned: what npm ci installs.
func Lock() npm.Lock {
	return npm.Lock{Name: "node", Package: packageJSON, PackageLock: packageLock, Dir: "recipes/node"}
}
