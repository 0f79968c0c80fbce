package npm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lockOf is a lock file that pins deps (name → version) with an integrity each.
func lockOf(deps ...string) string {
	s := `{"lockfileVersion":3,"packages":{"":{"name":"t"}`
	for i := 0; i+1 < len(deps); i += 2 {
		s += `,"node_modules/` + deps[i] + `":{"version":"` + deps[i+1] + `","integrity":"sha512-AA=="}`
	}
	return s + "}}"
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, pkg, lock, want string
	}{
		{"pinned", `{"dependencies":{"ioredis":"6.0.0","@s/r":"1.4.0-rc.1"}}`, lockOf("ioredis", "6.0.0", "@s/r", "1.4.0-rc.1"), ""},
		{"no dependencies", `{"name":"t"}`, lockOf(), ""},
		{"a range", `{"dependencies":{"ioredis":"^6.0.0"}}`, lockOf("ioredis", "6.0.0"), `package.json: dependency ioredis "^6.0.0": not an exact version`},
		{"a tag", `{"dependencies":{"ioredis":"latest"}}`, lockOf("ioredis", "6.0.0"), "not an exact version"},
		{"locked at another version", `{"dependencies":{"ioredis":"6.0.1"}}`, lockOf("ioredis", "6.0.0"), "package-lock.json: dependency ioredis@6.0.1 is not locked at that version"},
		{"not locked", `{"dependencies":{"pg":"8.23.1"}}`, lockOf("ioredis", "6.0.0"), "dependency pg@8.23.1 is not locked"},
		{"no integrity", `{"dependencies":{"pg":"8.23.1"}}`, `{"lockfileVersion":3,"packages":{"node_modules/pg":{"version":"8.23.1"}}}`, "pg@8.23.1 has no sha512 integrity"},
		{"an old lock file", `{"dependencies":{}}`, `{"lockfileVersion":1}`, "lockfileVersion 1"},
		{"not JSON", `{`, lockOf(), "d/package.json: unexpected end of JSON input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Lock{Name: "n", Package: []byte(c.pkg), PackageLock: []byte(c.lock), Dir: "d"}.Check()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Check() = %v, want %q", err, c.want)
			}
		})
	}
}

// empty is a package with no dependency: npm ci installs it with no network.
var empty = Lock{Name: "n", Package: []byte(`{"name":"zlc-empty","private":true}` + "\n"),
	PackageLock: []byte(`{"name":"zlc-empty","lockfileVersion":3,"requires":true,"packages":{"":{"name":"zlc-empty"}}}` + "\n"), Dir: "d"}

// TestInstallIsMadeOnce runs the real npm ci on a package with nothing to download,
// then asks again with programs that do not exist: the second call finds the install
// and runs nothing. A changed pin is another install, and Sweep removes the old one.
func TestInstallIsMadeOnce(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("no npm")
	}
	cache := t.TempDir()
	var log bytes.Buffer
	dir, err := Install(context.Background(), Config{CacheDir: cache, Log: &log}, empty)
	if err != nil {
		t.Fatal(err)
	}
	if dir != Dir(Config{CacheDir: cache}, empty) || !strings.Contains(log.String(), "installing the n workers' libraries from the npm registry") {
		t.Fatalf("Install() = %s (log %q), want %s", dir, log.String(), Dir(Config{CacheDir: cache}, empty))
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the install lacks %s: %v", f, err)
		}
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	again, err := Install(context.Background(), Config{CacheDir: cache, Node: "/nonexistent/node", Npm: "/nonexistent/npm"}, empty)
	if err != nil || again != dir {
		t.Fatalf("second Install() = %s, %v; want %s and no npm run", again, err, dir)
	}
	changed := empty
	changed.Package = []byte(`{"name":"zlc-empty","private":true,"description":"another pin"}` + "\n")
	if Dir(Config{CacheDir: cache}, changed) == dir {
		t.Fatal("two pins share an install")
	}
	removed, err := Sweep(Config{CacheDir: cache}, changed)
	if err != nil || len(removed) != 1 || removed[0] != dir {
		t.Fatalf("Sweep() = %v, %v; want [%s]", removed, err, dir)
	}
}

func TestInstallErrors(t *testing.T) {
	if _, err := Install(context.Background(), Config{}, empty); err == nil || !strings.Contains(err.Error(), "ZLC_CACHE_DIR") {
		t.Errorf("no cache: %v", err)
	}
	cache := t.TempDir()
	_, err := Install(context.Background(), Config{CacheDir: cache, Npm: "/nonexistent/npm"}, empty)
	if !errors.Is(err, ErrNoNode) || !strings.Contains(err.Error(), "/nonexistent/npm is missing") || !strings.Contains(err.Error(), "apt-get install nodejs") {
		t.Errorf("no npm: %v", err)
	}
	_, err = Install(context.Background(), Config{CacheDir: cache, Node: "/nonexistent/node"}, empty)
	if !errors.Is(err, ErrNoNode) {
		t.Errorf("no node: %v", err)
	}
	bad := Lock{Name: "n", Package: []byte(`{"dependencies":{"ioredis":"^6"}}`), PackageLock: []byte(lockOf()), Dir: "d"}
	if _, err := Install(context.Background(), Config{CacheDir: cache}, bad); err == nil || !strings.Contains(err.Error(), "d/package.json") {
		t.Errorf("unpinned: %v", err)
	}
	// npm ci itself fails (a fake npm, failing as npm ci does when the registry
	// refuses): the error names the lock file and carries npm's words, and the
	// temporary directory goes.
	_, err = Install(context.Background(), Config{CacheDir: cache, Npm: writeFakeNpm(t)}, empty)
	if err == nil || !strings.Contains(err.Error(), "npm ci of d/package-lock.json") || !strings.Contains(err.Error(), "fake npm refuses: ci --ignore-scripts") {
		t.Errorf("npm ci failing: %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("left in the cache: %v", entries)
	}
}

// writeFakeNpm is an npm that fails as npm ci does when it cannot install, without
// asking the registry.
func writeFakeNpm(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "npm")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 'fake npm refuses:' \"$@\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
