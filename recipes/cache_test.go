package recipes

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/zlockcheck/zlockcheck/internal/npm"
	"github.com/zlockcheck/zlockcheck/internal/pypi"
	"github.com/zlockcheck/zlockcheck/recipes/curator"
	"github.com/zlockcheck/zlockcheck/recipes/jvm"
	nodeworkers "github.com/zlockcheck/zlockcheck/recipes/node"
	pyworkers "github.com/zlockcheck/zlockcheck/recipes/python"
)

func TestUnpackNamesItsDirectoryByContent(t *testing.T) {
	cache := t.TempDir()
	files := fstest.MapFS{
		"w.py":     {Data: []byte("print(1)\n")},
		"build.sh": {Data: []byte("#!/bin/sh\n")},
	}
	builds := 0
	build := func(dir string) error {
		builds++
		return os.WriteFile(filepath.Join(dir, "built"), nil, 0o644)
	}
	first, err := unpack(cache, "w", build, files)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^w-[0-9a-f]{32}$`).MatchString(filepath.Base(first.Dir)) || filepath.Dir(first.Dir) != cache || !first.Fresh {
		t.Errorf("first unpack = %+v, want a fresh %s/w-<hash>", first, cache)
	}
	if data, err := os.ReadFile(filepath.Join(first.Dir, "w.py")); err != nil || string(data) != "print(1)\n" {
		t.Errorf("w.py = %q, %v", data, err)
	}
	if fi, err := os.Stat(filepath.Join(first.Dir, "build.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("build.sh: %v, %v: want it executable", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(first.Dir, "built")); err != nil {
		t.Errorf("what build made is missing: %v", err)
	}

	again, err := unpack(cache, "w", build, files)
	if err != nil || again.Dir != first.Dir || again.Fresh || builds != 1 {
		t.Errorf("second unpack = %+v, %v after %d builds; want the same directory, not fresh, one build", again, err, builds)
	}

	files["w.py"] = &fstest.MapFile{Data: []byte("print(2)\n")}
	changed, err := unpack(cache, "w", build, files)
	if err != nil || changed.Dir == first.Dir || !changed.Fresh {
		t.Errorf("unpack of changed files = %+v, %v; want a new directory", changed, err)
	}
}

// TestUnpackConcurrently: first uses at once (goroutines here; separate processes take
// the same path, a temporary directory each and one rename) all get the same complete
// directory, built by whoever renamed first, and leave no temporary directory behind.
func TestUnpackConcurrently(t *testing.T) {
	cache := t.TempDir()
	files := fstest.MapFS{"w.py": {Data: []byte("pass\n")}}
	var builds, fresh atomic.Int32
	const n = 8
	dirs := make([]string, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			u, err := unpack(cache, "w", func(dir string) error {
				builds.Add(1)
				// A slow build with several files, so that the others overlap it.
				for j := range 50 {
					if err := os.WriteFile(filepath.Join(dir, "part"+string(rune('a'+j%26))+strings.Repeat("x", j/26)), []byte("data"), 0o644); err != nil {
						return err
					}
				}
				return nil
			}, files)
			if err != nil {
				t.Error(err)
				return
			}
			if u.Fresh {
				fresh.Add(1)
			}
			dirs[i] = u.Dir
		}()
	}
	start.Done()
	wg.Wait()
	if fresh.Load() != 1 {
		t.Errorf("%d unpacks were fresh, want exactly one (%d builds)", fresh.Load(), builds.Load())
	}
	for _, d := range dirs {
		if d != dirs[0] {
			t.Fatalf("unpacks returned %v, want one directory", dirs)
		}
	}
	entries, err := os.ReadDir(dirs[0])
	if err != nil || len(entries) != 51 {
		t.Errorf("%s has %d entries (%v), want w.py and 50 built files", dirs[0], len(entries), err)
	}
	left, _ := os.ReadDir(cache)
	if len(left) != 1 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("cache holds %v, want only %s", names, filepath.Base(dirs[0]))
	}
}

func TestUnpackFailedBuildLeavesNothing(t *testing.T) {
	cache := t.TempDir()
	boom := errors.New("boom")
	_, err := unpack(cache, "w", func(string) error { return boom }, fstest.MapFS{"w.py": {Data: []byte("x")}})
	if !errors.Is(err, boom) {
		t.Errorf("unpack = %v, want the build's error", err)
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("a failed build left %d entries in the cache", len(left))
	}
}

// TestMissingJVMSaysWhatToInstall runs the Java check against a fake machine: an
// empty $PATH (no java, javac or jar) and an empty jar directory.
func TestMissingJVMSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r, err := Find("curator-mutex")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Command(context.Background(), CommandEnv{Self: "zlockcheck", CacheDir: t.TempDir(), JavaDir: t.TempDir()})
	if err == nil {
		t.Fatal("Command without a JVM succeeded")
	}
	for _, want := range []string{"recipe curator-mutex", "javac (not on $PATH)", "slf4j-simple.jar",
		"apt-get install default-jdk-headless libcurator-recipes-java libslf4j-java"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// The same fake machine with a (fake) JDK on $PATH and (empty, fake) jars passes.
	bin, jars := t.TempDir(), t.TempDir()
	for _, c := range []string{"java", "javac", "jar"} {
		if err := os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range Java.needs(false) {
		if n.file != "" {
			if err := os.WriteFile(filepath.Join(jars, n.file), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("PATH", bin)
	if err := Java.check(CommandEnv{JavaDir: jars}, false); err != nil {
		t.Errorf("check with everything present: %v", err)
	}
}

// TestMavenReleaseNeedsAJDKAndMaven runs a recipe of a Curator release from Maven
// Central against fake machines: with no JDK the error names the JDK's and Maven's
// packages and none of Debian's Curator jars; with a (fake) JDK and a (fake) mvn that
// fails, the fetch's error names the release, and the cache keeps nothing.
func TestMavenReleaseNeedsAJDKAndMaven(t *testing.T) {
	r, err := Find("curator-5.9-mutex")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = r.Command(context.Background(), CommandEnv{Self: "zlockcheck", CacheDir: t.TempDir(), JavaDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "apt-get install default-jdk-headless maven") || strings.Contains(err.Error(), "libcurator") {
		t.Errorf("Command without a JVM = %v, want the JDK's and Maven's packages and no Debian Curator", err)
	}

	bin := t.TempDir()
	for _, c := range []string{"java", "javac", "jar", "mvn"} {
		if err := os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	cache := t.TempDir()
	_, err = r.Command(context.Background(), CommandEnv{Self: "zlockcheck", CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "jvm curator-5.9.0: mvn dependency:copy-dependencies") {
		t.Errorf("Command with a failing mvn = %v, want the fetch's error", err)
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("a failed fetch left %d entries in the cache", len(left))
	}
}

func TestInProcessCommand(t *testing.T) {
	r, err := Find("zlc-mutex")
	if err != nil {
		t.Fatal(err)
	}
	argv, err := r.Command(context.Background(), CommandEnv{Self: "/bin/zlockcheck"})
	if err != nil || strings.Join(argv, " ") != "/bin/zlockcheck worker --recipe zlc-mutex" {
		t.Errorf("Command = %q, %v", argv, err)
	}
}

// TestKazooCommandUnpacksTheWorker needs Debian's python3-kazoo.
func TestKazooCommandUnpacksTheWorker(t *testing.T) {
	if err := Python.check(CommandEnv{}, false); err != nil {
		t.Skip(err)
	}
	r, err := Find("kazoo-lock")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	argv, err := r.Command(context.Background(), CommandEnv{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 3 || argv[0] != pypi.Python || !strings.HasPrefix(argv[1], cache+"/python-workers-") || argv[2] != "kazoo-lock" {
		t.Fatalf("Command = %q", argv)
	}
	got, err := os.ReadFile(argv[1])
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fs.ReadFile(pyworkers.Files(), "kazoo_worker.py")
	if string(got) != string(want) {
		t.Error("the unpacked worker differs from the embedded one")
	}
}

// TestCuratorCommandBuildsTheWorker compiles the embedded Curator worker into a new
// cache (javac, jar and a class-data-sharing training run: several seconds).
func TestCuratorCommandBuildsTheWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the Curator worker")
	}
	if err := Java.check(CommandEnv{}, false); err != nil {
		t.Skip(err)
	}
	r, err := Find("curator-semaphore")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	argv, err := r.Command(context.Background(), CommandEnv{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 3 || filepath.Base(argv[0]) != "run.sh" || argv[2] != "curator-semaphore" {
		t.Fatalf("Command = %q", argv)
	}
	for _, f := range []string{"ZlcCuratorWorker.class", "zlc-curator.jar", "zlc-curator.jsa"} {
		if _, err := os.Stat(filepath.Join(argv[1], f)); err != nil {
			t.Error(err)
		}
	}
}

// TestNodeCommandUsesTheInstall: a Node recipe's command line runs node on its worker,
// unpacked beside a link to the node_modules of the install its pins name; an install
// already there (made here by hand) is used as it is, with no npm run.
func TestNodeCommandUsesTheInstall(t *testing.T) {
	if err := Node.check(CommandEnv{}, true); err != nil {
		t.Skip(err)
	}
	cache := t.TempDir()
	install := npm.Dir(npm.Config{CacheDir: cache}, nodeworkers.Lock())
	if err := os.MkdirAll(filepath.Join(install, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Find("redis-semaphore-mutex")
	if err != nil {
		t.Fatal(err)
	}
	argv, err := r.Command(context.Background(), CommandEnv{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	node, _ := exec.LookPath("node")
	if len(argv) != 3 || argv[0] != node || !strings.HasPrefix(argv[1], cache+"/node-workers-") ||
		filepath.Base(argv[1]) != "redis_semaphore_worker.js" || argv[2] != "redis-semaphore-mutex" {
		t.Fatalf("Command = %q", argv)
	}
	if link, err := os.Readlink(filepath.Join(filepath.Dir(argv[1]), "node_modules")); err != nil || link != filepath.Join(install, "node_modules") {
		t.Errorf("node_modules links to %q (%v), want %s", link, err, filepath.Join(install, "node_modules"))
	}
	for _, f := range []string{"zlcworker.js", "redisclient.js", "redlock_worker.js"} {
		got, err := os.ReadFile(filepath.Join(filepath.Dir(argv[1]), f))
		want, _ := fs.ReadFile(nodeworkers.Files(), f)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: the unpacked script differs from the embedded one (%v)", f, err)
		}
	}
}

// TestMissingNodeSaysWhatToInstall: on a machine without node and npm a Node recipe's
// command is an error that names them and the package to install, and leaves nothing
// in the cache.
func TestMissingNodeSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cache := t.TempDir()
	r, err := Find("node-redlock")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Command(context.Background(), CommandEnv{CacheDir: cache})
	if err == nil {
		t.Fatal("Command() without node: no error")
	}
	for _, want := range []string{"recipe node-redlock", "the Node workers (npm)", "node (not on $PATH)", "npm (not on $PATH)", "apt-get install nodejs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("left in the cache: %v", entries)
	}
}

// TestSweepWorkers: the worker directories of other worker versions, of a family
// gone (kazoo), or whose library install is gone are removed; today's and everything
// else in the cache stay.
func TestSweepWorkers(t *testing.T) {
	cache := t.TempDir()
	sum := func(trees ...fs.FS) string {
		h, err := contentHash(trees...)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	py, cur, jv, nd := sum(pyworkers.Files()), sum(curator.Files(), jvm.Sources()), sum(jvm.Sources()), sum(nodeworkers.Files())
	other := strings.Repeat("0", 32)
	mk := func(name string, links map[string]string) {
		if err := os.MkdirAll(filepath.Join(cache, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for link, target := range links {
			if err := os.Symlink(filepath.Join(cache, target), filepath.Join(cache, name, link)); err != nil {
				t.Fatal(err)
			}
		}
	}
	keep := []string{"m2", "python-venv-0123456789abcdef", "jvm-r-1-0123456789abcdef", "node-npm-0123456789abcdef",
		"zookeeper-3.8.6-0123456789abcdef", "python-workers-" + py, "curator-" + cur, "curator-jvm-r-1-0123456789abcdef-" + cur,
		"workers-jvm-r-1-0123456789abcdef-ZlcX-" + jv, "node-workers-0123456789abcdef-" + nd}
	gone := []string{"python-workers-" + other, "kazoo-" + other, "curator-" + other, "curator-jvm-old-0123456789abcdef-" + cur,
		"workers-jvm-old-0123456789abcdef-ZlcX-" + jv, "workers-jvm-r-1-0123456789abcdef-ZlcX-" + other,
		"node-workers-fedcba9876543210-" + nd}
	for _, name := range append(append([]string{}, keep...), gone...) {
		links := map[string]string{}
		switch {
		case strings.HasPrefix(name, "curator-jvm-"):
			links["lib"] = strings.TrimSuffix(strings.TrimPrefix(name, "curator-"), "-"+cur) + "/lib"
		case strings.HasPrefix(name, "node-workers-"):
			links["node_modules"] = "node-npm-" + strings.Split(name, "-")[2] + "/node_modules"
		}
		mk(name, links)
	}
	for _, dir := range []string{"jvm-r-1-0123456789abcdef/lib", "node-npm-0123456789abcdef/node_modules"} {
		if err := os.MkdirAll(filepath.Join(cache, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := SweepWorkers(cache)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range removed {
		got = append(got, filepath.Base(r))
	}
	slices.Sort(got)
	slices.Sort(gone)
	if !slices.Equal(got, gone) {
		t.Errorf("SweepWorkers removed %q, want %q", got, gone)
	}
	for _, name := range keep {
		if _, err := os.Stat(filepath.Join(cache, name)); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
}
