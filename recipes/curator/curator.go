// Package curator carries the scripts that build and run the Curator worker inside
// the zlockcheck binary, so that a binary installed with `go install` or copied
// elsewhere can build the worker without the checkout. The worker's Java sources are
// recipes/jvm's (ZlcCuratorWorker.java and the protocol it shares, ZlcWorker.java):
// package recipes unpacks both side by side and builds them (javac against Debian's
// jars, or a Curator release's) on first use.
package curator

import (
	"embed"
	"io/fs"
)

// The scripts; the Python test drivers stay in the checkout.
//
//go:embed build.sh cds.sh classpath.sh run.sh
var files embed.FS

// Files returns the worker's scripts: build.sh OUTDIR compiles the classes (cds.sh
// OUTDIR adds the class-data-sharing archive), run.sh OUTDIR RECIPE runs one worker.
// The scripts find each other in their own directory, and the Java sources beside
// them or, in the checkout, in ../jvm.
func Files() fs.FS { return files }
