package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/internal/npm"
	"github.com/zlockcheck/zlockcheck/internal/pypi"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/recipes/jvm"
	nodeworkers "github.com/zlockcheck/zlockcheck/recipes/node"
	pyworkers "github.com/zlockcheck/zlockcheck/recipes/python"
)

// fetchCmd fetches what runs may take from the registries into the cache: from Maven
// Central the ZooKeeper releases of --zk-version and the Java workers' libraries, from
// PyPI the Python workers' libraries into their virtual environment, from the npm
// registry the Node workers' libraries, and what each kind's Fetcher brings (the etcd
// releases of --etcd-version, built from the Go module proxy) (make setup runs it; a second call downloads
// nothing), and removes from the cache what no pinned release uses any more
// (maven.Sweep, pypi.Sweep, npm.Sweep) and the worker directories this binary would
// not use (recipes.SweepWorkers).
func fetchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("fetch", stderr)
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{"fetch takes no arguments"}
	}
	dir, err := maven.CacheDir(os.Getenv("ZLC_CACHE_DIR"))
	if err != nil {
		return exitError, err
	}
	cfg := maven.Config{CacheDir: dir, Log: stderr}
	if err := zookeeper.FetchReleases(ctx, cfg); err != nil {
		return exitError, err
	}
	if err := jvm.FetchAll(ctx, cfg); err != nil {
		return exitError, err
	}
	what := []string{"ZooKeeper releases and Java workers' libraries from Maven Central", "Python workers' libraries from PyPI", "Node workers' libraries from npm"}
	for _, f := range lockservice.Fetchers() {
		if err := f.Fetch(ctx, dir, stderr); err != nil {
			return exitError, err
		}
		what = append(what, f.What)
	}
	pcfg := pypi.Config{CacheDir: dir, Log: stderr}
	if _, err := pypi.Venv(ctx, pcfg, pyworkers.Requirements()); err != nil {
		return exitError, err
	}
	ncfg := npm.Config{CacheDir: dir, Log: stderr}
	if _, err := npm.Install(ctx, ncfg, nodeworkers.Lock()); err != nil {
		return exitError, err
	}
	removed, err := maven.Sweep(dir, zookeeper.ReleasesManifest(), jvm.Manifest())
	if err == nil {
		var venvs []string
		venvs, err = pypi.Sweep(pcfg, pyworkers.Requirements())
		removed = append(removed, venvs...)
	}
	if err == nil {
		var installs []string
		installs, err = npm.Sweep(ncfg, nodeworkers.Lock())
		removed = append(removed, installs...)
	}
	for _, f := range lockservice.Fetchers() {
		if err == nil {
			var left []string
			left, err = f.Sweep(dir)
			removed = append(removed, left...)
		}
	}
	if err == nil {
		// After the installs: a worker directory whose install went goes too.
		var workers []string
		workers, err = recipes.SweepWorkers(dir)
		removed = append(removed, workers...)
	}
	for _, r := range removed {
		fmt.Fprintf(stderr, "removed %s from the cache: no release pinned today, nor this binary's workers, use it\n", r)
	}
	if err != nil {
		return exitError, err
	}
	fmt.Fprintf(stdout, "in %s: %s\n", dir, strings.Join(what, ", "))
	return 0, nil
}
