// Package python carries the Python workers inside the zlockcheck binary: the pinned
// requirements of the libraries from PyPI (requirements.txt, every line with its
// hash), the one implementation of the worker protocol they share (zlcworker.py) and a
// worker per library (redis_py_worker.py, python_redis_lock_worker.py,
// pottery_worker.py, pals_worker.py, etcd3_worker.py; the Redis workers' client and lease made in one
// place: redisclient.py), and the Kazoo worker (kazoo_worker.py, on zlcworker.py
// too), which runs both Debian's Kazoo (python3-kazoo, on /usr/bin/python3) and the
// current release from PyPI. Package recipes unpacks the scripts into the cache and runs a worker with
// Debian's interpreter or with that of a virtual environment of the requirements in
// the cache (internal/pypi); `zlockcheck fetch` makes the environment beforehand.
package python

import (
	"embed"
	"io/fs"

	"github.com/zlockcheck/zlockcheck/internal/pypi"
)

//go:embed requirements.txt
var requirements []byte

// The tools that build the sdists requirements.txt names with --no-binary.
//
//go:embed build-requirements.txt
var buildRequirements []byte

// The workers and the protocol module; the tests stay in the checkout.
//
//go:embed zlcworker.py redisclient.py redis_py_worker.py python_redis_lock_worker.py pottery_worker.py pals_worker.py etcd3_worker.py kazoo_worker.py
var files embed.FS

// Files are the workers' scripts, which run side by side (each imports zlcworker).
func Files() fs.FS { return files }

// Requirements are the libraries the workers import, pinned with their hashes.
func Requirements() pypi.Requirements {
	return pypi.Requirements{Name: "python", Text: requirements, File: "recipes/python/requirements.txt",
		Build: buildRequirements, BuildFile: "recipes/python/build-requirements.txt"}
}
