package main

import (
	"context"
	"io"
	"os"

	"github.com/zlockcheck/zlockcheck/recipes"
)

func workerCmd(ctx context.Context, args []string, stderr io.Writer) (int, error) {
	fs := newFlagSet("worker", stderr)
	recipe := fs.String("recipe", "gozk", "recipe to serve")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if err := recipes.Serve(ctx, recipes.ServeConfig{Recipe: *recipe, In: os.Stdin, Out: os.Stdout, Log: stderr}); err != nil {
		return exitError, err
	}
	return 0, nil
}
