// Package gobuild builds a pinned Go program into zlockcheck's cache: a main module
// (its go.mod and go.sum pin every module by version and hash, as a Maven lock file
// or pip's --require-hashes do) compiled from the Go module proxy with the go
// command, once. lockservice/etcd builds the etcd server releases of --etcd-version
// with it. A module's directory is named by the hash of its files, so a changed pin
// is built anew and a second build of the same pin does nothing (no download, no
// compile).
package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/cachedir"
)

// Module is a main module to build: its files, go.mod and go.sum among them.
type Module struct {
	// Name names the program: its cache directory starts with it, and the binary
	// is Name in that directory ("etcd-3.6.16").
	Name string
	// Files are the module's files by name (flat: no directories).
	Files map[string][]byte
	// Source names where the files live in the checkout, for errors
	// ("lockservice/etcd/releases/v3.6.16").
	Source string
}

// Config is where a build goes and what it says.
type Config struct {
	// CacheDir is the cache directory (maven.CacheDir's answer).
	CacheDir string
	// Log receives a line before a build that compiles (nil: none).
	Log io.Writer
}

// Dir is the module's directory in the cache: Name and the hash of its files.
func (m Module) Dir(cacheDir string) string {
	return filepath.Join(cacheDir, m.Name+"-"+m.hash())
}

// Binary is where the built program is.
func (m Module) Binary(cacheDir string) string { return filepath.Join(m.Dir(cacheDir), m.Name) }

// hash is the first 12 hex digits of the SHA-256 of the files, names and contents.
func (m Module) hash() string {
	h := sha256.New()
	names := make([]string, 0, len(m.Files))
	for n := range m.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(m.Files[n]))
		h.Write(m.Files[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Built reports whether the module's binary is in the cache.
func (m Module) Built(cacheDir string) bool {
	st, err := os.Stat(m.Binary(cacheDir))
	return err == nil && st.Mode().IsRegular()
}

// Build compiles the module into the cache unless it is there, and returns the
// binary's path. The go command runs with -mod=readonly and -trimpath and the
// machine's own toolchain: a go.sum that does not cover a module, or a module whose
// hash differs from it, fails the build. A failed build leaves nothing in the cache.
func Build(ctx context.Context, cfg Config, m Module) (string, error) {
	if m.Name == "" || m.Files["go.mod"] == nil || m.Files["go.sum"] == nil {
		return "", fmt.Errorf("gobuild: module %q (%s) needs a name, a go.mod and a go.sum", m.Name, m.Source)
	}
	if cfg.CacheDir == "" {
		return "", errors.New("gobuild: no cache directory")
	}
	bin := m.Binary(cfg.CacheDir)
	if m.Built(cfg.CacheDir) {
		return bin, nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building %s (%s) needs the go command, not found on $PATH: install Go (make setup builds it)", m.Name, m.Source)
	}
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "building %s from the Go module proxy (%s) into %s\n", m.Name, m.Source, cfg.CacheDir)
	}
	_, err = cachedir.Put(m.Dir(cfg.CacheDir), ".zlc-build-"+m.Name+"-*", func(tmp string) error {
		src := filepath.Join(tmp, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(src)
		for n, data := range m.Files {
			if err := os.WriteFile(filepath.Join(src, n), data, 0o644); err != nil {
				return err
			}
		}
		cmd := exec.CommandContext(ctx, goCmd, "build", "-mod=readonly", "-trimpath", "-o", filepath.Join(tmp, m.Name), ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=", "CGO_ENABLED=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build of %s (%s): %v: %s", m.Name, m.Source, err, lastLines(out.String(), 12))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return bin, nil
}

// Sweep removes the cache directories of programs named prefix-... that none of mods
// is: the builds a changed pin left behind. It returns what it removed.
func Sweep(cacheDir, prefix string, mods ...Module) ([]string, error) {
	keep := make([]string, len(mods))
	for i, m := range mods {
		keep[i] = m.Dir(cacheDir)
	}
	return cachedir.Sweep(filepath.Join(cacheDir, prefix+"-*"), keep...)
}

// lastLines is the last n lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
