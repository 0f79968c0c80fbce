// Command testnodes runs the SSH-node test fixture (package internal/testnodes) in the
// foreground for a human: scripts/zlc-ssh-nodes.sh starts it in the background
// (`up N DIR`) and stops it (`down DIR`). It is test support, not part of zlockcheck.
//
//	go run ./internal/testnodes/cmd N DIR
//
// It starts N nodes with their files in DIR, writes DIR/nodes.env (the nodes'
// addresses, user, key and known_hosts file, as shell variables) once they serve,
// and removes everything when it gets SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testnodes:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: testnodes N DIR")
	}
	count, err := strconv.Atoi(args[0])
	if err != nil {
		//lint:ignore ST1005 the message starts with a worker's name (A, B, N)
		return fmt.Errorf("N: %w", err)
	}
	dir, err := filepath.Abs(args[1])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nodes, err := testnodes.Start(ctx, testnodes.Config{N: count, Dir: dir})
	if err != nil {
		return err
	}
	var addrs []string
	for _, a := range nodes.Addrs {
		addrs = append(addrs, a.String())
	}
	env := fmt.Sprintf("SSH_NODES=%s\nSSH_USER=%s\nSSH_KEY=%s\nSSH_KNOWN_HOSTS=%s\nSSH_PORT=%d\n",
		strings.Join(addrs, ","), nodes.User, nodes.KeyFile, nodes.KnownHostsFile, nodes.Port)
	if err := os.WriteFile(filepath.Join(dir, "nodes.env"), []byte(env), 0o644); err != nil {
		return errorsJoin(err, nodes.Close())
	}
	fmt.Print(env)
	<-ctx.Done()
	os.Remove(filepath.Join(dir, "nodes.env"))
	return nodes.Close()
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; and closing: %v", a, b)
}
