package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// keepPolicy says which runs stay in the store: all, or only those that did not pass.
type keepPolicy string

// The keep policies of --keep.
const (
	keepAll    keepPolicy = "all"
	keepFailed keepPolicy = "failed"
)

func parseKeep(s string) (keepPolicy, error) {
	switch keepPolicy(s) {
	case keepAll, keepFailed:
		return keepPolicy(s), nil
	}
	return "", fmt.Errorf("want all or failed, got %q", s)
}

// pruneRun removes a run directory that passed (under --keep failed) and points the
// store's latest links at the newest run left, or removes them when none is left.
func pruneRun(store, name, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	base := filepath.Join(store, name)
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	var stamps []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "latest" {
			stamps = append(stamps, e.Name())
		}
	}
	sort.Strings(stamps) // timestamps sort by time
	testLink, storeLink := filepath.Join(base, "latest"), filepath.Join(store, "latest")
	storeTarget, _ := os.Readlink(storeLink)
	pointsHere := storeTarget == filepath.Join(name, filepath.Base(dir))
	_ = os.Remove(testLink)
	if pointsHere {
		_ = os.Remove(storeLink)
	}
	if len(stamps) == 0 {
		return os.Remove(base)
	}
	newest := stamps[len(stamps)-1]
	if err := os.Symlink(newest, testLink); err != nil {
		return err
	}
	if pointsHere {
		return os.Symlink(filepath.Join(name, newest), storeLink)
	}
	return nil
}
