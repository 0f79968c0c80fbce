package recipes

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/cachedir"
	"github.com/zlockcheck/zlockcheck/recipes/curator"
	"github.com/zlockcheck/zlockcheck/recipes/jvm"
	nodeworkers "github.com/zlockcheck/zlockcheck/recipes/node"
	pyworkers "github.com/zlockcheck/zlockcheck/recipes/python"
)

// unpacked is a worker's files in the cache: Dir holds them (and what was built from
// them); Fresh is true in the one process that put Dir in place.
type unpacked struct {
	Dir   string
	Fresh bool
}

// unpack makes sure cacheDir/<name>-<hash of files> holds files, every tree of them
// merged into one directory (their *.sh executable), and what build made of them, and
// returns that directory. The first use unpacks and builds into a temporary directory
// beside it and renames that into place (cachedir.Put), so a directory that exists is
// complete: processes that start at once each build, the first rename wins and the
// others discard their copy. build may be nil; it gets the temporary directory, whose
// path is not the final one.
func unpack(cacheDir, name string, build func(dir string) error, files ...fs.FS) (unpacked, error) {
	sum, err := contentHash(files...)
	if err != nil {
		return unpacked{}, fmt.Errorf("%s worker: %w", name, err)
	}
	dir := filepath.Join(cacheDir, name+"-"+sum)
	var fillErr error // the unpack's or the build's own error, returned as it is
	fresh, err := cachedir.Put(dir, "."+name+"-*.tmp", func(tmp string) error {
		for _, f := range files {
			if err := writeFiles(f, tmp); err != nil {
				fillErr = fmt.Errorf("%s worker: unpack into %s: %w", name, tmp, err)
				return fillErr
			}
		}
		if build != nil {
			fillErr = build(tmp)
		}
		return fillErr
	})
	if fillErr != nil {
		return unpacked{}, fillErr
	}
	if err != nil {
		return unpacked{}, fmt.Errorf("%s worker cache: %w", name, err)
	}
	return unpacked{Dir: dir, Fresh: fresh}, nil
}

// contentHash is a hex SHA-256 of the trees' file names and contents, each tree in
// walk (lexical) order, the trees in the order given.
func contentHash(trees ...fs.FS) (string, error) {
	h := sha256.New()
	for _, files := range trees {
		err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(files, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
			h.Write(data)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// writeFiles copies files into dir; shell scripts (*.sh) are made executable.
func writeFiles(files fs.FS, dir string) error {
	return fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(path.Base(p), ".sh") {
			mode = 0o755
		}
		return os.WriteFile(target, data, mode)
	})
}

// errNoCacheDir: neither a cache directory was given nor does the user have one.
var errNoCacheDir = errors.New("no cache directory for the Java and Python workers (set ZLC_CACHE_DIR)")

// workerFamilies are the kinds of worker directory unpack makes in the cache (see
// Command's callers of unpack): a name's prefix, and the embedded trees whose
// contentHash ends the name. A family's directories whose hash is another (an older
// binary's workers) are swept by SweepWorkers; so are those of families this binary no
// longer has (kazoo: recipes/kazoo joined recipes/python).
func workerFamilies() []struct {
	prefix string
	trees  []fs.FS
} {
	return []struct {
		prefix string
		trees  []fs.FS
	}{
		{"python-workers-", []fs.FS{pyworkers.Files()}},
		{"curator-", []fs.FS{curator.Files(), jvm.Sources()}}, // Debian's, or curator-RELEASE-
		{"workers-", []fs.FS{jvm.Sources()}},                  // workers-RELEASE-MAIN-
		{"node-workers-", []fs.FS{nodeworkers.Files()}},       // node-workers-INSTALL-
		{"kazoo-", nil},
	}
}

// hashedName matches a directory unpack made: a name, "-" and a contentHash.
var hashedName = regexp.MustCompile(`^(.+)-([0-9a-f]{32})$`)

// SweepWorkers removes from the cache the worker directories this binary would not
// use: those unpacked from other versions of the workers (each change of a script or
// source makes a new directory), and those whose library install (a link to it, or
// the release in its name) is gone, as pypi.Sweep, npm.Sweep and maven.Sweep remove
// the installs themselves. It returns what it removed. A run of another zlockcheck
// version that shares the cache unpacks its workers again on its next use.
func SweepWorkers(cacheDir string) ([]string, error) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		m := hashedName.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		dir := filepath.Join(cacheDir, e.Name())
		stale, err := staleWorkerDir(cacheDir, dir, m[1], m[2])
		if err != nil {
			return removed, err
		}
		if !stale {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return removed, err
		}
		removed = append(removed, dir)
	}
	return removed, nil
}

// staleWorkerDir reports whether dir (named name-hash) is a worker directory of a
// family whose current hash is another, or whose library is gone.
func staleWorkerDir(cacheDir, dir, name, hash string) (bool, error) {
	for _, f := range workerFamilies() {
		if !strings.HasPrefix(name+"-", f.prefix) {
			continue
		}
		if f.trees == nil {
			return true, nil
		}
		want, err := contentHash(f.trees...)
		if err != nil {
			return false, err
		}
		if hash != want {
			return true, nil
		}
		// A link to a library install (curator's lib, node's node_modules) that is gone.
		for _, link := range []string{"lib", "node_modules"} {
			if target, err := os.Readlink(filepath.Join(dir, link)); err == nil {
				if _, err := os.Stat(target); err != nil {
					return true, nil
				}
			}
		}
		// workers-RELEASE-MAIN: the release's directory of jars.
		if f.prefix == "workers-" {
			release := strings.TrimPrefix(name, f.prefix)
			release = release[:max(strings.LastIndex(release, "-"), 0)]
			if _, err := os.Stat(filepath.Join(cacheDir, release)); err != nil {
				return true, nil
			}
		}
		return false, nil
	}
	return false, nil
}
