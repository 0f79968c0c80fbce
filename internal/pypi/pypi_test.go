package pypi

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

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"pinned", "# c\nredis==8.1.0 \\\n    --hash=sha256:ab\nx==1 --hash=sha256:cd\n", ""},
		{"unpinned", "# c\nredis>=8 \\\n    --hash=sha256:ab\n", "req.txt:2: requirement redis>=8: not pinned with =="},
		{"no hash", "redis==8.1.0\n\nx==1 --hash=sha256:cd\n", "req.txt:1: requirement redis==8.1.0: no --hash=sha256 pin"},
		{"after a continuation", "a==1 \\\n  --hash=sha256:ab\nb==2\n", "req.txt:3: requirement b==2: no --hash"},
		{"an sdist", "--no-binary etcd3\netcd3==0.12.0 --hash=sha256:ab\n", ""},
		{"an sdist without build tools", "--no-binary etcd3\netcd3==0.12.0 --hash=sha256:ab\n", "req.txt: --no-binary asks for an sdist to be built, and no build requirements"},
		{"another option", "--index-url https://example.com\nx==1 --hash=sha256:cd\n", "req.txt:1: --index-url https://example.com: the only option line taken is --no-binary NAME"},
		{"every sdist", "--no-binary :all:\nx==1 --hash=sha256:cd\n", "the only option line taken is --no-binary NAME"},
		{"an unpinned build tool", "x==1 --hash=sha256:cd\n", "build.txt:1: requirement setuptools: not pinned"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Requirements{Name: "py", Text: []byte(c.text), File: "req.txt",
				Build: []byte("setuptools==84.2.1 --hash=sha256:ef\n"), BuildFile: "build.txt"}
			switch c.name {
			case "an sdist without build tools":
				r.Build = nil
			case "an unpinned build tool":
				r.Build = []byte("setuptools --hash=sha256:ef\n")
			case "pinned", "unpinned", "no hash", "after a continuation":
				r.Build = nil
			}
			err := r.Check()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Check() = %v, want %q", err, c.want)
			}
		})
	}
}

// TestVenvIsMadeOnce makes an environment of Debian's python3 with nothing to
// install (no network), then asks again with an interpreter that does not exist: the
// second call finds the environment and runs nothing.
func TestVenvIsMadeOnce(t *testing.T) {
	if _, err := os.Stat(Python); err != nil {
		t.Skip("no " + Python)
	}
	cache := t.TempDir()
	var log bytes.Buffer
	r := Requirements{Name: "py", Text: []byte("# nothing pinned\n"), File: "req.txt"}
	dir, err := Venv(context.Background(), Config{CacheDir: cache, Log: &log}, r)
	if errors.Is(err, ErrNoVenv) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if dir != Dir(Config{CacheDir: cache}, r) || !strings.Contains(log.String(), "installing the py workers' libraries") {
		t.Fatalf("Venv() = %s (log %q), want %s", dir, log.String(), Dir(Config{CacheDir: cache}, r))
	}
	// The environment works where it was renamed to: its interpreter's prefix is it.
	out, err := exec.Command(filepath.Join(dir, "bin", "python"), "-c", "import sys; print(sys.prefix)").Output()
	if err != nil || strings.TrimSpace(string(out)) != dir {
		t.Fatalf("the environment's python: prefix %q, %v; want %s", out, err, dir)
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	again, err := Venv(context.Background(), Config{CacheDir: cache, Python: "/nonexistent/python3"}, r)
	if err != nil || again != dir {
		t.Fatalf("second Venv() = %s, %v; want %s and no interpreter run", again, err, dir)
	}
	// A changed pin is another environment; Sweep removes the old one.
	r2 := Requirements{Name: "py", Text: []byte("# another pin\n"), File: "req.txt"}
	if Dir(Config{CacheDir: cache}, r2) == dir {
		t.Fatal("two requirements files share an environment")
	}
	removed, err := Sweep(Config{CacheDir: cache}, r2)
	if err != nil || len(removed) != 1 || removed[0] != dir {
		t.Fatalf("Sweep() = %v, %v; want [%s]", removed, err, dir)
	}
}

func TestVenvErrors(t *testing.T) {
	r := Requirements{Name: "py", Text: []byte("x==1 --hash=sha256:ab\n"), File: "req.txt"}
	if _, err := Venv(context.Background(), Config{}, r); err == nil || !strings.Contains(err.Error(), "ZLC_CACHE_DIR") {
		t.Errorf("no cache: %v", err)
	}
	cache := t.TempDir()
	_, err := Venv(context.Background(), Config{CacheDir: cache, Python: "/nonexistent/python3"}, r)
	if err == nil || !strings.Contains(err.Error(), "apt-get install python3 python3-venv") {
		t.Errorf("no interpreter: %v", err)
	}
	bad := Requirements{Name: "py", Text: []byte("x>=1\n"), File: "req.txt"}
	if _, err := Venv(context.Background(), Config{CacheDir: cache}, bad); err == nil || !strings.Contains(err.Error(), "req.txt:1") {
		t.Errorf("unpinned: %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("left in the cache: %v", entries)
	}
}

// TestBuildToolsAreOfTheEnvironment: the same requirements with other build tools are
// another environment.
func TestBuildToolsAreOfTheEnvironment(t *testing.T) {
	cfg := Config{CacheDir: "/cache"}
	r := Requirements{Name: "py", Text: []byte("x==1 --hash=sha256:cd\n")}
	withTools := r
	withTools.Build = []byte("setuptools==84.2.1 --hash=sha256:ef\n")
	other := withTools
	other.Build = []byte("setuptools==84.2.0 --hash=sha256:01\n")
	if Dir(cfg, r) == Dir(cfg, withTools) || Dir(cfg, withTools) == Dir(cfg, other) {
		t.Fatalf("Dir: %s, %s, %s; want three", Dir(cfg, r), Dir(cfg, withTools), Dir(cfg, other))
	}
}
