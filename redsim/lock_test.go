package redsim

import (
	"testing"
)

func catalog(t *testing.T, name string) Recipe {
	t.Helper()
	r, err := CatalogRecipe(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSmokeRedisLock(t *testing.T) {
	s, err := ParseSchedule("clients 2\nacquire c0\nrun c0\nacquire c1\nrun c1\ntick 100ms\nrun c1\nrelease c0\nrun c0\n")
	if err != nil {
		t.Fatal(err)
	}
	info, err := ReplayLock(t, LockConfig{Recipe: catalog(t, "redis-lock")}, s)
	for _, l := range info.Trace {
		t.Log(l)
	}
	if err != nil || info.Failure != nil {
		t.Fatal(err, info.Failure)
	}
}
