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
	"strings"
)

// unpacked is a worker's files in the cache: Dir holds them (and what was built from
// them); Fresh is true in the one process that put Dir in place.
type unpacked struct {
	Dir   string
	Fresh bool
}

// unpack makes sure cacheDir/<name>-<hash of files> holds files, every tree of them
// merged into one directory (their *.sh executable), and what build made of them, and
// returns that directory. The first use
// unpacks and builds into a temporary directory beside it and renames that into place,
// so a directory that exists is complete: processes that start at once each build, the
// first rename wins and the others discard their copy. build may be nil; it gets the
// temporary directory, whose path is not the final one.
func unpack(cacheDir, name string, build func(dir string) error, files ...fs.FS) (unpacked, error) {
	sum, err := contentHash(files...)
	if err != nil {
		return unpacked{}, fmt.Errorf("%s worker: %w", name, err)
	}
	dir := filepath.Join(cacheDir, name+"-"+sum)
	if _, err := os.Stat(dir); err == nil {
		return unpacked{Dir: dir}, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return unpacked{}, fmt.Errorf("%s worker cache: %w", name, err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "."+name+"-*.tmp")
	if err != nil {
		return unpacked{}, fmt.Errorf("%s worker cache: %w", name, err)
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	// MkdirTemp makes it private; the workers may run as another user.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return unpacked{}, fmt.Errorf("%s worker cache: %w", name, err)
	}
	for _, f := range files {
		if err := writeFiles(f, tmp); err != nil {
			return unpacked{}, fmt.Errorf("%s worker: unpack into %s: %w", name, tmp, err)
		}
	}
	if build != nil {
		if err := build(tmp); err != nil {
			return unpacked{}, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return unpacked{Dir: dir}, nil // another process got there first
		}
		return unpacked{}, fmt.Errorf("%s worker cache: %w", name, err)
	}
	return unpacked{Dir: dir, Fresh: true}, nil
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
