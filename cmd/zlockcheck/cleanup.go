package main

import (
	"context"
	"fmt"
	"io"
	"strings"

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
	rep, err := lockservice.Sweep(context.Background(), lockservice.SweepConfig{All: *all, SSH: nodes, EveryNodeRun: true})
	if nodes != nil {
		// Every run's leftovers on the nodes, whatever --all says: a node does not
		// know whether the harness that made them still lives.
		for _, l := range rep.Nodes {
			fmt.Fprintln(stdout, "removed "+l)
		}
		if len(rep.Nodes) == 0 {
			fmt.Fprintf(stdout, "nothing to clean up on %s\n", strings.Join(nodes.Nodes, ", "))
		}
	}
	net := rep.Net
	if len(net.Namespaces) == 0 {
		fmt.Fprintln(stdout, "nothing to clean up: no zlc namespaces")
	} else {
		fmt.Fprintf(stdout, "removed %d namespaces (%v) and killed %d processes in them\n",
			len(net.Namespaces), net.Namespaces, len(net.Processes))
	}
	if len(net.Links)+len(net.Tables) > 0 {
		fmt.Fprintf(stdout, "removed from the host's own namespace: links %v, nft tables %v (interface forwarding restored)\n", net.Links, net.Tables)
	}
	if net.Skipped > 0 {
		fmt.Fprintf(stdout, "left %d namespaces of runs whose harness is still running (--all removes them too)\n", net.Skipped)
	}
	for _, l := range rep.Servers {
		fmt.Fprintln(stdout, l.Line)
	}
	if err != nil {
		return exitError, err
	}
	return 0, nil
}
