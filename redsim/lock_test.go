package redsim

import (
	"strings"
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

func TestDebugCrash(t *testing.T) {
	s, _ := ParseSchedule("clients 2\nacquire c0\ndelay c0\ncrash c0\n")
	info, err := ReplayLock(t, LockConfig{Recipe: catalog(t, "redis-lock")}, s)
	for _, l := range info.Trace {
		t.Log(l)
	}
	t.Log(err, info.Failure)
}

func TestDebugStats(t *testing.T) {
	runs, steps, acq := 0, 0, 0
	CheckLock(t, LockConfig{Recipe: catalog(t, "redis-lock")}, func(ri RunInfo) {
		runs++
		steps += len(ri.Schedule.Steps)
		for _, l := range ri.Trace {
			if strings.Contains(l, ": acquired") {
				acq++
			}
		}
		if runs == 5 {
			for _, l := range ri.Trace {
				t.Log(l)
			}
		}
	})
	t.Logf("%d runs, %d steps, %d acquires", runs, steps, acq)
}
