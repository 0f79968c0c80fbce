package main

import (
	"fmt"
	"io"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

func cleanupCmd(args []string, stdout io.Writer) (int, error) {
	if len(args) > 0 {
		return exitError, usageError{"cleanup takes no arguments"}
	}
	rep, err := netns.CleanupAll()
	if len(rep.Namespaces) == 0 {
		fmt.Fprintln(stdout, "nothing to clean up: no zlc namespaces")
	} else {
		fmt.Fprintf(stdout, "removed %d namespaces (%v) and killed %d processes in them\n",
			len(rep.Namespaces), rep.Namespaces, len(rep.Processes))
	}
	if err != nil {
		return exitError, err
	}
	return 0, nil
}
