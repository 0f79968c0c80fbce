// Package kazoo carries the Kazoo worker (kazoo_worker.py) inside the zlockcheck
// binary, so that a binary installed with `go install` or copied elsewhere can run it
// without the checkout. Package recipes unpacks it on first use; it runs on Debian's
// /usr/bin/python3 with python3-kazoo.
package kazoo

import (
	"embed"
	"io/fs"
)

//go:embed kazoo_worker.py
var files embed.FS

// Files returns the worker: /usr/bin/python3 kazoo_worker.py RECIPE runs one.
func Files() fs.FS { return files }
