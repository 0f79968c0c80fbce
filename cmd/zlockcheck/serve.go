package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zlockcheck/zlockcheck/report/web"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("serve", stderr)
	store := fs.String("store", "store", "directory that keeps every run")
	addr := fs.String("addr", "127.0.0.1:8080", "address to serve the results browser on")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if err := web.Serve(ctx, web.Config{Store: *store}, *addr, stdout); err != nil {
		return exitError, err
	}
	return 0, nil
}
