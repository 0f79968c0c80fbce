package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

func cleanupCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("cleanup", stderr)
	all := fs.Bool("all", false, "also remove the namespaces of runs whose harness is still alive")
	var ssh sshOptions
	ssh.register(fs, false)
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{"cleanup takes no arguments"}
	}
	nodes, err := ssh.config(given(fs))
	if err != nil {
		return exitError, err
	}
	if nodes != nil {
		// Every run's leftovers on the nodes, whatever --all says: a node does not
		// know whether the harness that made them still lives.
		removed, err := lockservice.CleanupNodes(context.Background(), *nodes)
		for _, l := range removed {
			fmt.Fprintln(stdout, "removed "+l)
		}
		if len(removed) == 0 && err == nil {
			fmt.Fprintf(stdout, "nothing to clean up on %s\n", strings.Join(nodes.Nodes, ", "))
		}
		if err != nil {
			return exitError, err
		}
	}
	rep, err := netns.CleanupAll(*all)
	if len(rep.Namespaces) == 0 {
		fmt.Fprintln(stdout, "nothing to clean up: no zlc namespaces")
	} else {
		fmt.Fprintf(stdout, "removed %d namespaces (%v) and killed %d processes in them\n",
			len(rep.Namespaces), rep.Namespaces, len(rep.Processes))
	}
	if len(rep.Links)+len(rep.Tables) > 0 {
		fmt.Fprintf(stdout, "removed from the host's own namespace: links %v, nft tables %v (interface forwarding restored)\n", rep.Links, rep.Tables)
	}
	if rep.Skipped > 0 {
		fmt.Fprintf(stdout, "left %d namespaces of runs whose harness is still running (--all removes them too)\n", rep.Skipped)
	}
	// After the namespaces: an instance still in one belongs to a live run.
	left, rerr := lockservice.CleanupRedis()
	for _, l := range left {
		fmt.Fprintf(stdout, "killed redis-server %d (%s): its run's namespace was gone\n", l.Pid, l.Conf)
	}
	dbs, derr := lockservice.CleanupDatabases()
	for _, d := range dbs {
		killed := ""
		if len(d.Pids) > 0 {
			killed = fmt.Sprintf(", killed its processes %v", d.Pids)
		}
		fmt.Fprintf(stdout, "removed the %s server's directory %s%s: its run was gone\n", d.Kind, d.Dir, killed)
	}
	if err := errors.Join(err, rerr, derr); err != nil {
		return exitError, err
	}
	return 0, nil
}
