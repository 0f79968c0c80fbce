// Package curator carries the Curator worker (ZlcCuratorWorker.java and the scripts
// that build and run it) inside the zlockcheck binary, so that a binary installed with
// `go install` or copied elsewhere can build the worker without the checkout. Package
// recipes unpacks and builds it (javac against Debian's jars) on first use.
package curator

import (
	"embed"
	"io/fs"
)

// The worker's source and its scripts; the Python test drivers stay in the checkout.
//
//go:embed ZlcCuratorWorker.java build.sh cds.sh classpath.sh run.sh
var files embed.FS

// Files returns the worker's source and scripts: build.sh OUTDIR compiles the classes
// (cds.sh OUTDIR adds the class-data-sharing archive), run.sh OUTDIR RECIPE runs one
// worker. The scripts find each other in their own directory.
func Files() fs.FS { return files }
