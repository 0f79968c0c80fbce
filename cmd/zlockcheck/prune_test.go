package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPruneRunRepointsLatest(t *testing.T) {
	store := t.TempDir()
	base := filepath.Join(store, "gozk-mutex")
	for _, stamp := range []string{"20261122T010000.000Z", "20261122T020000.000Z", "20261122T030000.000Z"} {
		if err := os.MkdirAll(filepath.Join(base, stamp), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	newest := "20261122T030000.000Z"
	if err := os.Symlink(newest, filepath.Join(base, "latest")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("gozk-mutex", newest), filepath.Join(store, "latest")); err != nil {
		t.Fatal(err)
	}
	if err := pruneRun(store, "gozk-mutex", filepath.Join(base, newest)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, newest)); !os.IsNotExist(err) {
		t.Errorf("the pruned run is still there (%v)", err)
	}
	for link, want := range map[string]string{
		filepath.Join(base, "latest"):  "20261122T020000.000Z",
		filepath.Join(store, "latest"): filepath.Join("gozk-mutex", "20261122T020000.000Z"),
	} {
		if got, err := os.Readlink(link); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, want)
		}
	}
	// The last runs go: the test's directory and both links go with them.
	for _, stamp := range []string{"20261122T020000.000Z", "20261122T010000.000Z"} {
		if err := pruneRun(store, "gozk-mutex", filepath.Join(base, stamp)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(base); !os.IsNotExist(err) {
		t.Errorf("empty test directory left behind (%v)", err)
	}
	if _, err := os.Lstat(filepath.Join(store, "latest")); !os.IsNotExist(err) {
		t.Errorf("dangling store/latest left behind (%v)", err)
	}
}
