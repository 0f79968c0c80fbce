// Package pypi installs pinned Python libraries from PyPI into zlockcheck's cache: a
// requirements file (carried in the binary), every line pinned with its hashes, is
// installed with pip --require-hashes into a virtual environment of Debian's python3
// of its own: wheels only, but for a library PyPI has no wheel of, which the file
// names with --no-binary and pip builds from its pinned sdist with the build tools
// of a second file, pinned alike (Requirements.Build). It owns the cache's layout
// for them:
//
//	CACHE/pip/                 pip's download cache
//	CACHE/NAME-venv-HASH/      the virtual environment (HASH: of the requirements)
//
// A directory that exists is complete (it is renamed into place once installed), so
// a second call, by make setup or a run, downloads nothing and runs no pip.
package pypi

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
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/cachedir"
)

// Python is the interpreter the environments are made of: Debian's, whose venv module
// python3-venv provides.
const Python = "/usr/bin/python3"

// Config says where environments go and what to tell the user.
type Config struct {
	// CacheDir is zlockcheck's cache directory (maven.CacheDir).
	CacheDir string
	// Log receives a line when an environment is made (nil: none).
	Log io.Writer
	// Python is the interpreter to make it with ("": Python).
	Python string
}

// Requirements is a requirements file: every requirement pinned (==) with its
// hashes, as pip's --require-hashes takes it.
type Requirements struct {
	// Name says what the environment is for, in errors and in its directory
	// (e.g. "python").
	Name string
	// Text is the file's content.
	Text []byte
	// File is its path in the checkout, for errors.
	File string
	// Build is a requirements file of the tools that build the sdists Text asks for
	// (a "--no-binary NAME" line: PyPI has no wheel of NAME), e.g. setuptools,
	// pinned with hashes as Text is; nil when Text names wheels only. It is installed
	// first, and Text then with pip's --no-build-isolation, so that the sdists are
	// built with these tools (pip's own isolated build would fetch its tools
	// unpinned, with no hash checked).
	Build []byte
	// BuildFile is Build's path in the checkout, for errors.
	BuildFile string
}

// Check refuses a requirement that is not pinned with == and a hash, naming the
// file, line and requirement: pip would refuse it too, later and less clearly. An
// option line is refused but "--no-binary NAME", which needs Build.
func (r Requirements) Check() error {
	sdists, err := check(r.File, r.Text, true)
	if err != nil {
		return err
	}
	if sdists && len(r.Build) == 0 {
		return fmt.Errorf("%s: --no-binary asks for an sdist to be built, and no build requirements pin the tools", r.File)
	}
	if len(r.Build) > 0 {
		_, err = check(r.BuildFile, r.Build, false)
	}
	return err
}

// check checks one file (sdists: whether it may have --no-binary lines) and reports
// whether it has any.
func check(file string, text []byte, sdists bool) (bool, error) {
	lines := strings.Split(string(text), "\n")
	noBinary := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		start := i + 1
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSpace(strings.TrimSuffix(line, "\\")) + " " + strings.TrimSpace(lines[i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if strings.HasPrefix(fields[0], "-") {
			if !sdists || fields[0] != "--no-binary" || len(fields) != 2 || strings.HasPrefix(fields[1], ":") {
				return false, fmt.Errorf("%s:%d: %s: the only option line taken is --no-binary NAME", file, start, line)
			}
			noBinary = true
			continue
		}
		if !strings.Contains(fields[0], "==") {
			return false, fmt.Errorf("%s:%d: requirement %s: not pinned with ==", file, start, fields[0])
		}
		if !strings.Contains(line, "--hash=sha256:") {
			return false, fmt.Errorf("%s:%d: requirement %s: no --hash=sha256 pin", file, start, fields[0])
		}
	}
	return noBinary, nil
}

// Dir is where the environment of r lives in cfg's cache, whether made or not.
func Dir(cfg Config, r Requirements) string {
	text := r.Text
	if len(r.Build) > 0 {
		text = append(append(append([]byte{}, r.Build...), "\x00"...), r.Text...)
	}
	sum := sha256.Sum256(text)
	return filepath.Join(cfg.CacheDir, r.Name+"-venv-"+hex.EncodeToString(sum[:])[:16])
}

// ErrNoVenv is returned when the interpreter cannot make a virtual environment.
var ErrNoVenv = errors.New("python3 cannot make a virtual environment: apt-get install python3-venv, or run make setup")

// Venv makes sure the virtual environment of r exists in the cache, with r installed,
// and returns its directory (its interpreter is DIR/bin/python). The first call
// makes it in a temporary directory beside it and renames that into place; one that
// finds it there runs nothing.
func Venv(ctx context.Context, cfg Config, r Requirements) (string, error) {
	if cfg.CacheDir == "" {
		return "", errors.New("no cache directory for the Python workers' libraries (set ZLC_CACHE_DIR)")
	}
	dir := Dir(cfg, r)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := r.Check(); err != nil {
		return "", err
	}
	python := cfg.Python
	if python == "" {
		python = Python
	}
	if _, err := os.Stat(python); err != nil {
		return "", fmt.Errorf("%s libraries: %s is missing: apt-get install python3 python3-venv", r.Name, python)
	}
	_, err := cachedir.Put(dir, "."+r.Name+"-venv-*.tmp", func(tmp string) error {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "installing the %s workers' libraries from PyPI into %s\n", r.Name, cfg.CacheDir)
		}
		if out, err := exec.CommandContext(ctx, python, "-m", "venv", tmp).CombinedOutput(); err != nil {
			if bytes.Contains(out, []byte("ensurepip")) || bytes.Contains(out, []byte("No module named venv")) {
				return fmt.Errorf("%s libraries: %w", r.Name, ErrNoVenv)
			}
			return fmt.Errorf("%s libraries: %s -m venv: %w\n%s", r.Name, python, err, out)
		}
		python := filepath.Join(tmp, "bin", "python")
		var sdists []string
		if len(r.Build) > 0 {
			if err := install(ctx, cfg, python, r.BuildFile, filepath.Join(tmp, "zlc-build-requirements.txt"), r.Build); err != nil {
				return fmt.Errorf("%s libraries: %w", r.Name, err)
			}
			sdists = []string{"--no-build-isolation", "--use-pep517"}
		}
		if err := install(ctx, cfg, python, r.File, filepath.Join(tmp, "zlc-requirements.txt"), r.Text, sdists...); err != nil {
			return fmt.Errorf("%s libraries: %w", r.Name, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return dir, nil
}

// install writes text to req and has the environment's pip install it: every
// requirement pinned with its hashes, none of their dependencies (the file pins
// them), wheels only but for the file's --no-binary lines.
func install(ctx context.Context, cfg Config, python, file, req string, text []byte, extra ...string) error {
	if err := os.WriteFile(req, text, 0o644); err != nil {
		return err
	}
	args := append([]string{"-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
		"--require-hashes", "--no-deps", "--only-binary=:all:"}, extra...)
	pip := exec.CommandContext(ctx, python, append(args, "-r", req)...)
	pip.Env = append(os.Environ(), "PIP_CACHE_DIR="+filepath.Join(cfg.CacheDir, "pip"))
	if out, err := pip.CombinedOutput(); err != nil {
		return fmt.Errorf("pip install -r %s: %w\n%s", file, err, out)
	}
	return nil
}

// Sweep removes the environments of name in the cache other than keep's (a pin that
// changed leaves its old environment behind), and returns what it removed.
func Sweep(cfg Config, keep Requirements) ([]string, error) {
	return cachedir.Sweep(filepath.Join(cfg.CacheDir, keep.Name+"-venv-*"), Dir(cfg, keep))
}
