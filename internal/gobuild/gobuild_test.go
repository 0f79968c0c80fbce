package gobuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hello is a module with no dependency: go.sum is empty, and the build needs no
// download.
func hello(msg string) Module {
	return Module{Name: "zlc-hello", Source: "a test's", Files: map[string][]byte{
		"go.mod":  []byte("module zlc.example/hello\n\ngo 1.22\n"),
		"go.sum":  {},
		"main.go": []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + msg + "\") }\n"),
	}}
}

func TestBuildOnceThenFromTheCache(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cache := t.TempDir()
	m := hello("hi")
	var log strings.Builder
	bin, err := Build(context.Background(), Config{CacheDir: cache, Log: &log}, m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hi" {
		t.Fatalf("built program says %q, %v", out, err)
	}
	if !strings.Contains(log.String(), "building zlc-hello") {
		t.Errorf("log %q does not say it built", log.String())
	}
	// A second build finds it, with no go command to run.
	t.Setenv("PATH", t.TempDir())
	log.Reset()
	again, err := Build(context.Background(), Config{CacheDir: cache, Log: &log}, m)
	if err != nil || again != bin || log.Len() != 0 {
		t.Errorf("second build: %s, %v, log %q; want %s from the cache, silently", again, err, log.String(), bin)
	}
	// Another pin is another directory; Sweep removes the first once it is not pinned.
	other := hello("ho")
	if other.Dir(cache) == m.Dir(cache) {
		t.Fatal("two modules share a directory")
	}
	removed, err := Sweep(cache, "zlc-hello", other)
	if err != nil || len(removed) != 1 || removed[0] != m.Dir(cache) {
		t.Errorf("Sweep removed %v, %v; want [%s]", removed, err, m.Dir(cache))
	}
}

func TestAFailedBuildLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cache := t.TempDir()
	m := hello("x")
	m.Files["main.go"] = []byte("package main\n\nfunc main() { undefined() }\n")
	_, err := Build(context.Background(), Config{CacheDir: cache}, m)
	if err == nil || !strings.Contains(err.Error(), "go build of zlc-hello (a test's)") || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("err = %v, want the compiler's words, naming the module", err)
	}
	left, _ := os.ReadDir(cache)
	if len(left) != 0 {
		t.Errorf("left in the cache: %v", left)
	}
}

func TestBuildRefuses(t *testing.T) {
	cache := t.TempDir()
	m := hello("x")
	delete(m.Files, "go.sum")
	if _, err := Build(context.Background(), Config{CacheDir: cache}, m); err == nil || !strings.Contains(err.Error(), "go.sum") {
		t.Errorf("no go.sum: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Build(context.Background(), Config{CacheDir: cache}, hello("x")); err == nil || !strings.Contains(err.Error(), "needs the go command") {
		t.Errorf("no go: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "zlc-hello")); err == nil {
		t.Error("a directory was made")
	}
}
