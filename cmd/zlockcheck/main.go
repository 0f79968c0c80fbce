// Command zlockcheck runs lock recipes against real lock services (ZooKeeper, Redis,
// PostgreSQL, MariaDB) under faults, records the history and checks it for
// linearizability.
//
// Exit codes of run and check: 0 valid, 1 invalid, 2 unknown, 3 error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	_ "github.com/zlockcheck/zlockcheck/lockservice/builtin" // the kinds of lock service it ships with
)

// Exit codes shared by run and check.
const (
	exitValid   = 0
	exitInvalid = 1
	exitUnknown = 2
	exitError   = 3
)

const usage = `usage: zlockcheck <command> [flags]

commands:
  run      start a lock service (ZooKeeper, Redis, PostgreSQL or MariaDB) and workers, record a history, check it
  explore  spend a time budget in rounds of runs that choose their own workload and faults
  check    check a history file (JSON Lines or Jepsen EDN) or re-check a run directory
  replay   run a stored run's configuration again (same seed) on fresh servers
  export   convert a run's history to Jepsen EDN (or JSON Lines)
  matrix   run every recipe under every fault class; print the safety matrix
  recipes  list the lock recipes that can be tested
  serve    browse the stored runs in a web browser
  cleanup  remove every zlc namespace, link and process a killed harness left
  fetch    fetch the ZooKeeper releases (--zk-version) and Java libraries runs take from Maven Central into the cache
  worker   serve the worker protocol on stdin/stdout (started by run)
  conformance  hold a worker command to the worker protocol, rule by rule
  zksim    run workers against the wire simulator with seeded faults (no ZooKeeper, no root)
  plain-loop   one process of run --baseline-processes (started by run)

Run 'zlockcheck <command> -h' for a command's flags.
Exit codes (run, check): 0 valid, 1 invalid, 2 unknown, 3 error.
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad command-line input.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		code int
		err  error
	)
	switch args[0] {
	case "run":
		code, err = runCmd(ctx, args[1:], stdout, stderr)
	case "explore":
		code, err = exploreCmd(ctx, args[1:], stdout, stderr)
	case "check":
		code, err = checkCmd(args[1:], stdout, stderr)
	case "replay":
		code, err = replayCmd(ctx, args[1:], stdout, stderr)
	case "export":
		code, err = exportCmd(args[1:], stdout, stderr)
	case "matrix":
		code, err = matrixCmd(ctx, args[1:], stdout, stderr)
	case "recipes":
		code, err = recipesCmd(args[1:], stdout, stderr)
	case "serve":
		code, err = serveCmd(ctx, args[1:], stdout, stderr)
	case "cleanup":
		code, err = cleanupCmd(args[1:], stdout, stderr)
	case "fetch":
		code, err = fetchCmd(ctx, args[1:], stdout, stderr)
	case "worker":
		code, err = workerCmd(ctx, args[1:], stderr)
	case "zksim":
		code, err = zksimCmd(ctx, args[1:], stdout, stderr)
	case "conformance":
		code, err = conformanceCmd(ctx, args[1:], stdout, stderr)
	case "plain-loop":
		code, err = plainLoopCmd(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprint(stderr, usage)
		err = fmt.Errorf("unknown command %q", args[0])
		code = exitError
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "zlockcheck %s: %v\n", args[0], err)
		if code == exitValid {
			code = exitError
		}
	}
	return code
}

// newFlagSet makes a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("zlockcheck "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// deprecatedAlias makes old another name of the flag now called name; parseFlags
// warns when it is used.
func deprecatedAlias(fs *flag.FlagSet, old, name string) {
	fs.Var(fs.Lookup(name).Value, old, "deprecated: use --"+name)
}

// parseFlags parses args and warns about every deprecated alias they used.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "deprecated: use --") {
			fmt.Fprintf(stderr, "warning: --%s is deprecated: use --%s\n", f.Name, strings.TrimPrefix(f.Usage, "deprecated: use --"))
		}
	})
	return nil
}
