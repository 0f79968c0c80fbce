package main

import (
	"flag"

	"github.com/zlockcheck/zlockcheck/harness"
)

// registerConnect defines the flags (and so the run-file keys) of a run against an
// existing ensemble (harness.Config.Connect).
func (o *runOptions) registerConnect(fs *flag.FlagSet) {
	fs.StringVar(&o.cfg.Connect, "connect", "", "test an existing ensemble instead of starting one: its client addresses, host:port,... (names resolved once; loopback cannot be reached from the workers' namespaces); only client faults are allowed")
	fs.StringVar(&o.cfg.Chroot, "chroot", "", "with --connect: the znode the run writes under, which must not exist and is deleted at the end (default "+harness.DefaultChrootParent+"/RUN_ID)")
}
