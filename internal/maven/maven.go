// Package maven fetches pinned JVM libraries and servers from Maven Central into
// zlockcheck's cache: a build manifest (a pom.xml carried in the binary) names them, one
// profile per thing to fetch, and Fetch copies a profile's runtime jars into a
// directory of their own. It owns the cache's layout for them:
//
//	CACHE/m2/                     the local Maven repository (every download lands here)
//	CACHE/NAME-PROFILE-HASH/lib/  a profile's jars (HASH: of the manifest)
//
// A directory that exists is complete (it is renamed into place once filled), so a
// second fetch, by make setup or a run, downloads nothing and runs no Maven.
package maven

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/cachedir"
)

// ErrNoMaven is returned when a fetch needs Maven and there is no mvn on $PATH.
var ErrNoMaven = errors.New("mvn (Maven) is not on $PATH: apt-get install maven, or run make setup")

// CacheDir is zlockcheck's cache directory: override when set (the CLI passes
// $ZLC_CACHE_DIR), else zlockcheck under the user's cache directory (e.g.
// ~/.cache/zlockcheck). The Java and Python workers are built there too.
func CacheDir(override string) (string, error) {
	if override != "" {
		return filepath.Abs(override)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set ZLC_CACHE_DIR): %v", err)
	}
	return filepath.Join(base, "zlockcheck"), nil
}

// Manifest is a build manifest: a pom.xml whose profiles each name what to fetch.
type Manifest struct {
	// Name says what the manifest is for, in errors and in its cache directories
	// (e.g. "zookeeper").
	Name string
	// POM is the pom.xml's content.
	POM []byte
	// Lock is the manifest's lock file (LockFile names it): the SHA-256 of every jar
	// each profile's fetch copies, one "PROFILE JAR SHA256" a line ('#' starts a
	// comment). Fetch refuses jars that differ from it, or a profile it does not list,
	// as pip's --require-hashes does. nil: not verified (tests only).
	Lock []byte
	// LockFile is the lock file's path in the checkout, for errors.
	LockFile string
}

// Profiles are the ids of the manifest's profiles, in its order.
func (m Manifest) Profiles() ([]string, error) {
	var pom struct {
		Profiles []struct {
			ID string `xml:"id"`
		} `xml:"profiles>profile"`
	}
	if err := xml.Unmarshal(m.POM, &pom); err != nil {
		return nil, fmt.Errorf("%s manifest: %w", m.Name, err)
	}
	ids := make([]string, len(pom.Profiles))
	for i, p := range pom.Profiles {
		ids[i] = p.ID
	}
	return ids, nil
}

// Config is where and how Fetch works.
type Config struct {
	// CacheDir is the cache directory (CacheDir's); required.
	CacheDir string
	// Log receives a line when Maven runs; nil discards it.
	Log io.Writer
}

// Fetch returns the directory that holds the jars of m's profile (DIR/lib/*.jar),
// fetching them first if the cache has not got them: Maven runs offline first (the
// local repository may hold them all) and online only if that fails.
func Fetch(ctx context.Context, cfg Config, m Manifest, profile string) (string, error) {
	ids, err := m.Profiles()
	if err != nil {
		return "", err
	}
	if !slices.Contains(ids, profile) {
		return "", fmt.Errorf("%s: no release %q (have %s)", m.Name, profile, strings.Join(ids, ", "))
	}
	if cfg.CacheDir == "" {
		return "", fmt.Errorf("%s %s: no cache directory", m.Name, profile)
	}
	dir := profileDir(cfg.CacheDir, m, profile)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("%s %s: %w", m.Name, profile, ErrNoMaven)
	}
	var fillErr error // the fetch's or the check's own error, returned as it is
	_, err = cachedir.Put(dir, "."+m.Name+"-*.tmp", func(tmp string) error {
		if fillErr = copyDependencies(ctx, cfg, m, profile, tmp); fillErr != nil {
			return fillErr
		}
		fillErr = m.verify(profile, filepath.Join(tmp, "lib"))
		return fillErr
	})
	if fillErr != nil {
		return "", fillErr
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", m.Name, profile, err)
	}
	return dir, nil
}

// profileDir is where the cache keeps m's profile: its name says the manifest, the
// profile and a hash of what decides its jars (profileKey), so a changed pin is
// fetched again, and adding or changing another profile fetches nothing.
func profileDir(cacheDir string, m Manifest, profile string) string {
	sum := sha256.Sum256(profileKey(m.POM, profile))
	return filepath.Join(cacheDir, fmt.Sprintf("%s-%s-%s", m.Name, profile, hex.EncodeToString(sum[:])[:16]))
}

// profileKey is what decides a profile's jars: the pom outside its <profiles> (the
// dependencies every profile shares) and the profile's own element. A pom whose
// profiles cannot be told apart is keyed whole.
func profileKey(pom []byte, profile string) []byte {
	start, end := bytes.Index(pom, []byte("<profiles>")), bytes.LastIndex(pom, []byte("</profiles>"))
	if start < 0 || end < start {
		return pom
	}
	key := slices.Concat(pom[:start], pom[end:])
	rest := pom[start:end]
	for {
		i := bytes.Index(rest, []byte("<profile>"))
		if i < 0 {
			return pom
		}
		j := bytes.Index(rest[i:], []byte("</profile>"))
		if j < 0 {
			return pom
		}
		element := rest[i : i+j]
		if bytes.Contains(element, []byte("<id>"+profile+"</id>")) {
			return append(key, element...)
		}
		rest = rest[i+j:]
	}
}

// Sweep removes from the cache what the manifests ms no longer name: a profile's
// directory (NAME-PROFILE-HASH) that is not the one Fetch would use today (a pin
// changed, a profile went), and every directory built from one (whose name holds it,
// e.g. a worker compiled against its jars). It returns the names it removed. A
// directory of a manifest not in ms is left alone.
func Sweep(cacheDir string, ms ...Manifest) ([]string, error) {
	entries, err := os.ReadDir(cacheDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	current := map[string]bool{}
	for _, m := range ms {
		ids, err := m.Profiles()
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			current[filepath.Base(profileDir(cacheDir, m, id))] = true
		}
	}
	var stale []string
	for _, e := range entries {
		for _, m := range ms {
			if e.IsDir() && profileDirName(m.Name).MatchString(e.Name()) && !current[e.Name()] {
				stale = append(stale, e.Name())
			}
		}
	}
	var removed []string
	for _, e := range entries {
		for _, s := range stale {
			if n := e.Name(); n == s || strings.HasSuffix(n, "-"+s) || strings.Contains(n, "-"+s+"-") {
				if err := os.RemoveAll(filepath.Join(cacheDir, n)); err != nil {
					return removed, err
				}
				removed = append(removed, n)
				break
			}
		}
	}
	return removed, nil
}

// profileDirName matches the names of manifest name's profile directories.
func profileDirName(name string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(name) + "-.+-[0-9a-f]{16}$")
}

// lockLines parses the lock file: profile -> jar -> its sha256 and line number.
func (m Manifest) lockLines() (map[string]map[string]lockEntry, error) {
	out := map[string]map[string]lockEntry{}
	for i, line := range strings.Split(string(m.Lock), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 || len(f[2]) != 64 {
			return nil, fmt.Errorf("%s:%d: want PROFILE JAR SHA256, got %q", m.LockFile, i+1, line)
		}
		if out[f[0]] == nil {
			out[f[0]] = map[string]lockEntry{}
		}
		out[f[0]][f[1]] = lockEntry{sum: f[2], line: i + 1}
	}
	return out, nil
}

// lockEntry is one jar's line of a lock file.
type lockEntry struct {
	sum  string
	line int
}

// CheckLock reports a lock file that does not parse, or that lists no jar of one of
// the manifest's profiles (such a profile's fetch would be refused).
func (m Manifest) CheckLock() error {
	ids, err := m.Profiles()
	if err != nil {
		return err
	}
	lines, err := m.lockLines()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if len(lines[id]) == 0 {
			return fmt.Errorf("%s lists no jar of %s %s", m.LockFile, m.Name, id)
		}
	}
	return nil
}

// verify checks the jars in lib against the lock file's lines for profile: the same
// names, each with its hash. A profile the lock file does not list is refused with the
// lines to add.
func (m Manifest) verify(profile, lib string) error {
	if m.Lock == nil {
		return nil
	}
	lines, err := m.lockLines()
	if err != nil {
		return err
	}
	want := lines[profile]
	got, err := jarHashes(lib)
	if err != nil {
		return fmt.Errorf("%s %s: %w", m.Name, profile, err)
	}
	if len(want) == 0 {
		var add []string
		for _, jar := range slices.Sorted(maps.Keys(got)) {
			add = append(add, profile+" "+jar+" "+got[jar])
		}
		return fmt.Errorf("%s %s: %s lists no jar of the profile; after checking them, add:\n%s", m.Name, profile, m.LockFile, strings.Join(add, "\n"))
	}
	for _, jar := range slices.Sorted(maps.Keys(got)) {
		switch w, ok := want[jar]; {
		case !ok:
			return fmt.Errorf("%s %s: Maven copied %s, which %s does not list for the profile (sha256 %s)", m.Name, profile, jar, m.LockFile, got[jar])
		case w.sum != got[jar]:
			return fmt.Errorf("%s:%d: %s has sha256 %s, the lock file says %s: refused", m.LockFile, w.line, jar, got[jar], w.sum)
		}
	}
	for _, jar := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[jar]; !ok {
			return fmt.Errorf("%s:%d: %s was not copied by Maven for %s", m.LockFile, want[jar].line, jar, profile)
		}
	}
	return nil
}

// jarHashes is the SHA-256 (hex) of every .jar in dir, by file name.
func jarHashes(dir string) (map[string]string, error) {
	jars, err := filepath.Glob(filepath.Join(dir, "*.jar"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, j := range jars {
		data, err := os.ReadFile(j)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		out[filepath.Base(j)] = hex.EncodeToString(sum[:])
	}
	return out, nil
}

// copyDependencies runs Maven on m's pom (written into tmp) to copy profile's runtime
// jars into tmp/lib: offline, then online if offline did not do it.
func copyDependencies(ctx context.Context, cfg Config, m Manifest, profile, tmp string) error {
	pom := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pom, m.POM, 0o644); err != nil {
		return err
	}
	args := []string{"-B", "-q", "-f", pom, "-P", profile,
		"-Dmaven.repo.local=" + filepath.Join(cfg.CacheDir, "m2"),
		"dependency:copy-dependencies", "-DincludeScope=runtime",
		"-DoutputDirectory=" + filepath.Join(tmp, "lib")}
	run := func(extra ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "mvn", append(extra, args...)...)
		cmd.Dir = tmp
		return cmd.CombinedOutput()
	}
	if _, err := run("-o"); err == nil {
		return nil
	}
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "fetching %s %s from Maven Central into %s\n", m.Name, profile, cfg.CacheDir)
	}
	out, err := run()
	if err != nil {
		return fmt.Errorf("%s %s: mvn dependency:copy-dependencies: %w\n%s", m.Name, profile, err, tail(out, 20))
	}
	return nil
}

// tail is the last n lines of out.
func tail(out []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(out, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
