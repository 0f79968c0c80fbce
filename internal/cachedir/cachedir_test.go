package cachedir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestPut(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "x-1")
	fills := 0
	fill := func(tmp string) error {
		fills++
		return os.WriteFile(filepath.Join(tmp, "f"), []byte("made"), 0o644)
	}
	for i, wantPut := range []bool{true, false} {
		put, err := Put(dir, ".x-*.tmp", fill)
		if err != nil || put != wantPut {
			t.Fatalf("call %d: Put() = %v, %v; want %v", i, put, err, wantPut)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(got) != "made" || fills != 1 {
		t.Fatalf("dir holds %q (%v) after %d fills, want made after 1", got, err, fills)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("dir mode %v (%v), want 0755", fi.Mode(), err)
	}
	// A fill that fails leaves nothing.
	boom := errors.New("boom")
	if _, err := Put(filepath.Join(cache, "x-2"), ".x-*.tmp", func(string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing fill: %v", err)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 || entries[0].Name() != "x-1" {
		t.Fatalf("cache holds %v, want x-1 only", entries)
	}
	removed, err := Sweep(filepath.Join(cache, "x-*"), filepath.Join(cache, "x-3"))
	if err != nil || len(removed) != 1 || removed[0] != dir {
		t.Fatalf("Sweep() = %v, %v; want [%s]", removed, err, dir)
	}
}
