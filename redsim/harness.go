package redsim

import (
	"context"
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// HarnessRecipe is one of the harness's Redis recipes (a catalogue constructor:
// redis-lock, redislock, redsync, a mutant) as a Recipe, unchanged: the
// constructor gets the simulator's dialer in Config.RedisDialer, the instances'
// addresses, the TTL as its session timeout and the key as its path; its lost events
// go to OnLost, its log lines to the trace. Its acquires wait until the scheduler
// times them out.
func HarnessRecipe(name string, build recipes.Constructor) Recipe {
	return Recipe{
		Name: name,
		New: func(env Env) (Locker, error) {
			r, err := build(context.Background(), recipes.Config{
				Servers:        env.Addrs,
				SessionTimeout: env.TTL,
				Path:           env.Key,
				Kind:           workloads.Mutex,
				Log:            logWriter{env.Logf},
				Events:         harnessEvents{env.OnLost},
				RedisDialer:    env.Dialer(),
			})
			if err != nil {
				return nil, err
			}
			return harnessLocker{r}, nil
		},
	}
}

// CatalogRecipe is the catalogue's recipe name (recipes.Find) as a HarnessRecipe.
func CatalogRecipe(name string) (Recipe, error) {
	e, err := recipes.Find(name)
	if err != nil {
		return Recipe{}, err
	}
	if e.New == nil {
		return Recipe{}, fmt.Errorf("recipe %s does not run in process", name)
	}
	return HarnessRecipe(name, e.New), nil
}

// harnessLocker adapts a harness recipe to Locker.
type harnessLocker struct{ r recipes.Recipe }

var _ Locker = harnessLocker{}

func (h harnessLocker) Acquire(ctx context.Context) (Hold, error) {
	_, err := h.r.Acquire(ctx, recipes.AcquireRequest{})
	return Hold{}, err
}

func (h harnessLocker) Release() error { return h.r.Release(context.Background()) }

func (h harnessLocker) Close() { _ = h.r.Close() }

// harnessEvents passes a harness recipe's lost events on.
type harnessEvents struct{ onLost func(string) }

var _ recipes.Events = harnessEvents{}

func (e harnessEvents) Lost(reason string)    { e.onLost(reason) }
func (e harnessEvents) Session(int64, []byte) {}
func (e harnessEvents) Renewed()              {}

// logWriter sends a recipe's log lines to Logf, without the logger's timestamp
// (the bubble's clock, the same in every replay, but noise in a trace).
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(b []byte) (int, error) {
	w.logf("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
