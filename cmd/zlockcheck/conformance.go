package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/zlockcheck/zlockcheck/conformance"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/zksim"
)

// Exit codes of conformance.
const (
	exitConforms = 0
	exitBroken   = 1
)

// conformanceCmd holds a worker command to the worker protocol, rule by rule, on a
// private server of its service on 127.0.0.1 (or, --zksim, ZooKeeper's wire
// simulator): exit 0 when every rule passed, 1 when one was broken, 3 when the suite
// could not run.
func conformanceCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("conformance", stderr)
	workerCmd := fs.String("worker-cmd", "", "the worker program and its arguments, as run --recipe exec takes them (required)")
	workload := fs.String("kind", string(workloads.Mutex), "the workload kind sent in init: "+kindNames())
	sessionTimeout := fs.Duration("session-timeout", lockservice.DefaultSessionTimeout, "the session timeout sent in init; the rules' bounds derive from it")
	service := fs.String("service", "", "the lock service the worker locks on, a private server of which the rules run against: "+kind.Names()+" (default zookeeper)")
	var kinds kindFlags
	kinds.register(fs)
	rules := fs.String("rules", "", "comma-separated rules to run (default all: "+strings.Join(ruleNames(), ", ")+")")
	sim := fs.Bool("zksim", false, "run the rules against the wire simulator's TCP server (no faults) instead of a private ZooKeeper")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected arguments %q (quote the worker command in --worker-cmd)", fs.Args())}
	}
	if *workerCmd == "" {
		return exitError, usageError{"--worker-cmd is required"}
	}
	k, err := workloads.ParseKind(*workload)
	if err != nil {
		return exitError, usageError{"--kind: " + err.Error()}
	}
	cfg := conformance.Config{
		// As run does: the shell splits the command; exec keeps the worker's pid.
		Argv: []string{"/bin/sh", "-c", "exec " + *workerCmd},
		Kind: k, SessionTimeout: *sessionTimeout, Progress: stderr,
	}
	if *service != "" {
		if cfg.Service, err = kind.Parse(*service); err != nil {
			return exitError, usageError{"--service: " + err.Error()}
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Settings, err = kinds.forKind(cfg.Service, set); err != nil {
		return exitError, err
	}
	if *rules != "" {
		cfg.Only = strings.Split(*rules, ",")
	}
	if *sim {
		if !cfg.Service.Is(kind.ZooKeeper) {
			return exitError, usageError{"--zksim: the wire simulator is a ZooKeeper; drop it, or --service zookeeper"}
		}
		srv, err := zksim.StartServer(zksim.ServerConfig{Listen: "127.0.0.1:0"})
		if err != nil {
			return exitError, err
		}
		defer srv.Close()
		cfg.Server = zookeeper.At(srv.Addr(), *sessionTimeout)
	}
	rep, err := conformance.Run(ctx, cfg)
	if len(rep.Results) > 0 {
		rep.Write(stdout)
	}
	if err != nil {
		return exitError, err
	}
	if !rep.OK() {
		return exitBroken, nil
	}
	return exitConforms, nil
}

func kindNames() string {
	var names []string
	for _, k := range workloads.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

func ruleNames() []string {
	var names []string
	for _, r := range conformance.Rules() {
		names = append(names, r.Name)
	}
	return names
}
