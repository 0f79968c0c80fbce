package redsim

import (
	"context"
	"fmt"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
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
				Log:            simsched.LogWriter{Logf: env.Logf},
				Events:         simsched.LostEvents{OnLost: env.OnLost},
				RedisDialer:    env.Dialer(),
			})
			if err != nil {
				return nil, err
			}
			return simsched.HarnessLocker[Hold]{R: r}, nil
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
