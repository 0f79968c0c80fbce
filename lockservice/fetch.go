package lockservice

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// Fetcher brings into the cache what a kind's servers run and no package manager
// installs (etcd's releases, built from the Go module proxy): `zlockcheck fetch`
// (make setup) runs every registered one, so that a run fetches or builds nothing.
type Fetcher struct {
	// Kind is the kind it fetches for; What says what, in fetch's last line
	// ("etcd releases built from the Go module proxy").
	Kind kind.Name
	What string
	// Fetch puts everything pinned into cacheDir, saying on log what it fetches or
	// builds; a second call does nothing.
	Fetch func(ctx context.Context, cacheDir string, log io.Writer) error
	// Sweep removes from cacheDir what no pin uses any more, and says what it removed.
	Sweep func(cacheDir string) ([]string, error)
}

// fetchers holds the registered Fetchers: written at start (init), read after.
var fetchers []Fetcher

// RegisterFetcher records a kind's Fetcher. Call it once, from the kind's package's
// init.
func RegisterFetcher(f Fetcher) {
	if f.Fetch == nil || f.Sweep == nil || slices.ContainsFunc(fetchers, func(o Fetcher) bool { return o.Kind == f.Kind }) {
		panic(fmt.Sprintf("lockservice: a second or incomplete fetcher for %q", f.Kind))
	}
	fetchers = append(fetchers, f)
}

// Fetchers lists the registered Fetchers, in the order registered.
func Fetchers() []Fetcher { return slices.Clone(fetchers) }
