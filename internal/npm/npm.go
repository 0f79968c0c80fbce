// Package npm installs pinned JavaScript libraries from the npm registry into
// zlockcheck's cache: a package.json whose every dependency is an exact version, and
// the package-lock.json npm made of it (both carried in the binary), installed with
// `npm ci --ignore-scripts` into a directory of their own. It owns the cache's layout
// for them:
//
//	CACHE/npm/                    npm's download cache
//	CACHE/NAME-npm-HASH/          package.json, package-lock.json and node_modules/ (HASH: of both files)
//
// A directory that exists is complete (it is renamed into place once installed), so
// a second call, by make setup or a run, downloads nothing and runs no npm.
package npm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/cachedir"
)

// Config says where installs go, what to tell the user and which programs to use.
type Config struct {
	// CacheDir is zlockcheck's cache directory (maven.CacheDir).
	CacheDir string
	// Log receives a line when an install is made (nil: none).
	Log io.Writer
	// Node and Npm are the programs ("": node and npm on $PATH).
	Node, Npm string
}

// Lock is a package.json and its package-lock.json: what `npm ci` installs.
type Lock struct {
	// Name says what the install is for, in errors and in its directory (e.g. "node").
	Name string
	// Package and PackageLock are the two files' contents.
	Package, PackageLock []byte
	// Dir is where the two files are in the checkout, for errors.
	Dir string
}

// Check refuses a package.json whose dependencies are not exact versions, and a
// lock file that is not npm's (lockfileVersion 2 or 3) or does not pin each of them
// at that version, naming the file and the dependency: npm ci would refuse the second
// later and less clearly, and would install a range as whatever it resolves today.
func (l Lock) Check() error {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(l.Package, &pkg); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(l.Dir, "package.json"), err)
	}
	var lock struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(l.PackageLock, &lock); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(l.Dir, "package-lock.json"), err)
	}
	if lock.LockfileVersion < 2 {
		return fmt.Errorf("%s: lockfileVersion %d: make it with npm 7 or later (npm install --package-lock-only)",
			filepath.Join(l.Dir, "package-lock.json"), lock.LockfileVersion)
	}
	names := make([]string, 0, len(pkg.Dependencies))
	for n := range pkg.Dependencies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := pkg.Dependencies[n]
		if !exact(v) {
			return fmt.Errorf("%s: dependency %s %q: not an exact version", filepath.Join(l.Dir, "package.json"), n, v)
		}
		p, ok := lock.Packages["node_modules/"+n]
		switch {
		case !ok || p.Version != v:
			return fmt.Errorf("%s: dependency %s@%s is not locked at that version (run npm install --package-lock-only)",
				filepath.Join(l.Dir, "package-lock.json"), n, v)
		case !strings.HasPrefix(p.Integrity, "sha512-"):
			return fmt.Errorf("%s: dependency %s@%s has no sha512 integrity", filepath.Join(l.Dir, "package-lock.json"), n, v)
		}
	}
	return nil
}

// exact reports whether v is a version and no range: digits and dots, and an
// optional pre-release or build suffix.
func exact(v string) bool {
	core, _, _ := strings.Cut(v, "-")
	core, _, _ = strings.Cut(core, "+")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// Dir is where the install of l lives in cfg's cache, whether made or not.
func Dir(cfg Config, l Lock) string {
	h := sha256.New()
	h.Write(l.Package)
	h.Write([]byte{0})
	h.Write(l.PackageLock)
	return filepath.Join(cfg.CacheDir, l.Name+"-npm-"+hex.EncodeToString(h.Sum(nil))[:16])
}

// ErrNoNode is returned when node or npm is not there to install or run the workers.
var ErrNoNode = errors.New("node and npm (Node.js 20 or later) are needed for the Node workers: apt-get install nodejs (NodeSource's, or Debian's nodejs npm), or run make setup")

// Program returns the path of node or npm as cfg says or as $PATH finds it, or an
// error wrapping ErrNoNode.
func Program(cfg Config, name string) (string, error) {
	p := map[string]string{"node": cfg.Node, "npm": cfg.Npm}[name]
	if p == "" {
		p = name
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("%s is missing (%v): %w", p, err, ErrNoNode)
	}
	return found, nil
}

// Install makes sure the install of l exists in the cache and returns its directory
// (its node_modules/ holds the libraries). The first call writes the two files into a
// temporary directory beside it, runs `npm ci --ignore-scripts` there (no package's
// install scripts run) and renames it into place (cachedir.Put); a failure leaves
// nothing. One that finds it there runs nothing.
func Install(ctx context.Context, cfg Config, l Lock) (string, error) {
	if cfg.CacheDir == "" {
		return "", errors.New("no cache directory for the Node workers' libraries (set ZLC_CACHE_DIR)")
	}
	dir := Dir(cfg, l)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := l.Check(); err != nil {
		return "", err
	}
	if _, err := Program(cfg, "node"); err != nil {
		return "", fmt.Errorf("%s libraries: %w", l.Name, err)
	}
	npm, err := Program(cfg, "npm")
	if err != nil {
		return "", fmt.Errorf("%s libraries: %w", l.Name, err)
	}
	_, err = cachedir.Put(dir, "."+l.Name+"-npm-*.tmp", func(tmp string) error {
		if err := os.WriteFile(filepath.Join(tmp, "package.json"), l.Package, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, "package-lock.json"), l.PackageLock, 0o644); err != nil {
			return err
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "installing the %s workers' libraries from the npm registry into %s\n", l.Name, cfg.CacheDir)
		}
		cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = tmp
		// npm's own download cache in zlockcheck's; no update check.
		cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(cfg.CacheDir, "npm"), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s libraries: npm ci of %s: %w\n%s", l.Name, filepath.Join(l.Dir, "package-lock.json"), err, out)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return dir, nil
}

// Sweep removes the installs of keep.Name in the cache other than keep's (a pin that
// changed leaves its old install behind), and returns what it removed.
func Sweep(cfg Config, keep Lock) ([]string, error) {
	return cachedir.Sweep(filepath.Join(cfg.CacheDir, keep.Name+"-npm-*"), Dir(cfg, keep))
}
