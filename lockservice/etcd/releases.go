package etcd

import (
	"context"
	"embed"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/gobuild"
)

// releasesFS holds the etcd releases a run can take (--etcd-version): releases/main.go.txt
// (a main around the server's etcdmain, the same for every release) and one directory
// per release whose go.mod and go.sum pin the server's module and everything it
// needs. The one place a release is added.
//
//go:embed releases/main.go.txt releases/*/go.mod.txt releases/*/go.sum.txt
var releasesFS embed.FS

// Debian is the version name of Debian's etcd-server package, the default.
const Debian = "debian"

// debianBinary is Debian's etcd server.
const debianBinary = "/usr/bin/etcd"

// Releases are the versions --etcd-version takes beside Debian's, oldest first: the
// directories of releases/.
func Releases() []string { return versionDirs(releasesFS, "releases") }

// versionDirs are the versions the directories vX of dir in fsys name, oldest first.
func versionDirs(fsys embed.FS, dir string) []string {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		panic("lockservice/etcd: " + dir + ": " + err.Error()) // embedded; a test reads it
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, strings.TrimPrefix(e.Name(), "v"))
		}
	}
	slices.SortFunc(out, compareVersions)
	return out
}

// compareVersions orders "3.5.35" before "3.6.16" before "3.10.0".
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < min(len(pa), len(pb)); i++ {
		var x, y int
		fmt.Sscan(pa[i], &x)
		fmt.Sscan(pb[i], &y)
		if x != y {
			return x - y
		}
	}
	return len(pa) - len(pb)
}

// module is release v's main module (v one of Releases).
func module(v string) (gobuild.Module, error) {
	if !slices.Contains(Releases(), v) {
		return gobuild.Module{}, fmt.Errorf("etcd-version: want %s or one of %s (lockservice/etcd/releases pins them), got %q", Debian, strings.Join(Releases(), ", "), v)
	}
	files := map[string][]byte{}
	for name, at := range map[string]string{"main.go": "releases/main.go.txt", "go.mod": path.Join("releases", "v"+v, "go.mod.txt"), "go.sum": path.Join("releases", "v"+v, "go.sum.txt")} {
		data, err := releasesFS.ReadFile(at)
		if err != nil {
			return gobuild.Module{}, err
		}
		files[name] = data
	}
	return gobuild.Module{Name: "etcd-" + v, Files: files, Source: "lockservice/etcd/releases/v" + v}, nil
}

// BuildReleases builds every release into the cache (make setup, through zlockcheck
// fetch): a run then builds nothing. log hears a line per release it compiles.
func BuildReleases(ctx context.Context, cacheDir string, log io.Writer) error {
	for _, v := range Releases() {
		m, err := module(v)
		if err != nil {
			return err
		}
		if _, err := gobuild.Build(ctx, gobuild.Config{CacheDir: cacheDir, Log: log}, m); err != nil {
			return err
		}
	}
	return nil
}

// SweepReleases removes from the cache the builds of releases no longer pinned.
func SweepReleases(cacheDir string) ([]string, error) {
	var mods []gobuild.Module
	for _, v := range Releases() {
		m, err := module(v)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	return gobuild.Sweep(cacheDir, "etcd", mods...)
}

// binary is the server binary of version v (Debian or a release), built in the
// cache: a release not built yet is an error that says how to build it (a run never
// compiles etcd on its own: it takes a minute or more).
func binary(v, cacheDir string) (string, error) {
	if v == "" || v == Debian {
		if _, err := exec.LookPath(debianBinary); err != nil {
			return "", fmt.Errorf("etcd: %s not found: install Debian's etcd-server (make setup), or pick a release with --etcd-version %s", debianBinary, strings.Join(Releases(), " | "))
		}
		return debianBinary, nil
	}
	m, err := module(v)
	if err != nil {
		return "", err
	}
	if !m.Built(cacheDir) {
		return "", fmt.Errorf("etcd-version %s: not built in %s: run zlockcheck fetch (make setup builds every pinned release)", v, cacheDir)
	}
	return m.Binary(cacheDir), nil
}
