// Package cachedir puts directories into zlockcheck's cache whole: a directory is
// filled under a temporary name beside its own and renamed into place, so that one
// that exists is complete (a second call finds it and does nothing), a failure leaves
// nothing behind, and processes that race each fill their own and the first rename
// wins. Sweep removes the ones a changed pin left behind. internal/maven's profiles,
// internal/pypi's virtual environments, internal/npm's installs and package recipes'
// unpacked workers are made with it.
package cachedir

import (
	"os"
	"path/filepath"
	"slices"
)

// Put makes dir with fill, unless it exists: fill gets an empty temporary directory
// (mode 0755: workers may run as another user) beside dir, named by the glob pattern
// tmpPattern (os.MkdirTemp's), which is renamed to dir once fill succeeded and
// removed in every case. It reports whether this call put dir in place.
func Put(dir, tmpPattern string, fill func(tmp string) error) (bool, error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(parent, tmpPattern)
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	if err := fill(tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return false, nil // another process got there first
		}
		return false, err
	}
	return true, nil
}

// Sweep removes every path that the glob pattern matches but those of keep, and
// returns what it removed.
func Sweep(pattern string, keep ...string) ([]string, error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, m := range matches {
		if slices.Contains(keep, m) {
			continue
		}
		if err := os.RemoveAll(m); err != nil {
			return removed, err
		}
		removed = append(removed, m)
	}
	return removed, nil
}
