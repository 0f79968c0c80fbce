package maven

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testPOM = `<project><modelVersion>4.0.0</modelVersion>
  <profiles>
    <profile><id>a-1.0</id></profile>
    <profile><id>b-2.0</id></profile>
  </profiles>
</project>`

func TestProfiles(t *testing.T) {
	ids, err := Manifest{Name: "t", POM: []byte(testPOM)}.Profiles()
	if err != nil || strings.Join(ids, ",") != "a-1.0,b-2.0" {
		t.Errorf("Profiles() = %v, %v; want a-1.0,b-2.0", ids, err)
	}
	if _, err := (Manifest{Name: "t", POM: []byte("<project>")}).Profiles(); err == nil || !strings.HasPrefix(err.Error(), "t manifest:") {
		t.Errorf("Profiles() of a broken pom = %v, want an error naming the manifest", err)
	}
}

// TestFetchRefusesWhatItCannotDo: an unknown profile names the known ones; no cache
// directory and no mvn are errors, and neither leaves anything in the cache.
func TestFetchRefusesWhatItCannotDo(t *testing.T) {
	m := Manifest{Name: "t", POM: []byte(testPOM)}
	ctx := context.Background()
	cache := t.TempDir()
	if _, err := Fetch(ctx, Config{CacheDir: cache}, m, "c-3.0"); err == nil || !strings.Contains(err.Error(), `no release "c-3.0" (have a-1.0, b-2.0)`) {
		t.Errorf("Fetch(c-3.0) = %v, want the known profiles listed", err)
	}
	if _, err := Fetch(ctx, Config{}, m, "a-1.0"); err == nil || !strings.Contains(err.Error(), "no cache directory") {
		t.Errorf("Fetch without a cache = %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Fetch(ctx, Config{CacheDir: cache}, m, "a-1.0"); !errors.Is(err, ErrNoMaven) {
		t.Errorf("Fetch without mvn = %v, want ErrNoMaven", err)
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("the refused fetches left %d entries in the cache", len(left))
	}
}

// TestFetchedOnceRunsNoMaven: a profile's directory, once in the cache, is returned
// as it is, with no mvn on $PATH (a second make setup downloads nothing); another
// manifest (its pom changed) has a directory of its own.
func TestFetchedOnceRunsNoMaven(t *testing.T) {
	m := Manifest{Name: "t", POM: []byte(testPOM)}
	cache := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	_, err := Fetch(context.Background(), Config{CacheDir: cache}, m, "a-1.0")
	if !errors.Is(err, ErrNoMaven) {
		t.Fatalf("first Fetch = %v, want ErrNoMaven", err)
	}
	// Put a fetched directory in place by hand, where Fetch looks.
	dir := fetchedDir(t, cache, m, "a-1.0")
	if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Fetch(context.Background(), Config{CacheDir: cache}, m, "a-1.0")
	if err != nil || got != dir {
		t.Errorf("Fetch of a cached profile = %s, %v; want %s", got, err, dir)
	}
	changed := Manifest{Name: "t", POM: []byte(strings.Replace(testPOM, "4.0.0", "4.0.0 ", 1))}
	if _, err := Fetch(context.Background(), Config{CacheDir: cache}, changed, "a-1.0"); !errors.Is(err, ErrNoMaven) {
		t.Errorf("Fetch of a changed manifest = %v, want it fetched again (ErrNoMaven here)", err)
	}
}

// fetchedDir is the cache directory Fetch keeps m's profile in.
func fetchedDir(t *testing.T, cache string, m Manifest, profile string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(cache, m.Name+"-"+profile+"-*"))
	if len(matches) != 0 {
		t.Fatalf("cache already holds %v", matches)
	}
	return profileDir(cache, m, profile)
}

// TestProfileKey: a profile's directory changes with its own pins and with what every
// profile shares, not with another profile's.
func TestProfileKey(t *testing.T) {
	cache := "/cache"
	m := Manifest{Name: "t", POM: []byte(testPOM)}
	a, b := profileDir(cache, m, "a-1.0"), profileDir(cache, m, "b-2.0")
	for _, tc := range []struct {
		what         string
		pom          string
		sameA, sameB bool
	}{
		{"a profile added", strings.Replace(testPOM, "</profiles>", "<profile><id>c-3.0</id></profile></profiles>", 1), true, true},
		{"b's pins changed", strings.Replace(testPOM, "<id>b-2.0</id>", "<id>b-2.0</id><dependencies/>", 1), true, false},
		{"a shared dependency changed", strings.Replace(testPOM, "<modelVersion>4.0.0", "<dependencies/><modelVersion>4.0.0", 1), false, false},
	} {
		c := Manifest{Name: "t", POM: []byte(tc.pom)}
		if got := profileDir(cache, c, "a-1.0") == a; got != tc.sameA {
			t.Errorf("%s: a-1.0's directory kept = %v, want %v", tc.what, got, tc.sameA)
		}
		if got := profileDir(cache, c, "b-2.0") == b; got != tc.sameB {
			t.Errorf("%s: b-2.0's directory kept = %v, want %v", tc.what, got, tc.sameB)
		}
	}
}

// TestSweep: the directories of a changed pin or a gone profile go, with what was
// built from them; today's, another manifest's and anything else stay.
func TestSweep(t *testing.T) {
	cache := t.TempDir()
	old := Manifest{Name: "t", POM: []byte(testPOM)}
	now := Manifest{Name: "t", POM: []byte(strings.Replace(testPOM, "<profile><id>b-2.0</id></profile>", "", 1))}
	now.POM = []byte(strings.Replace(string(now.POM), "<id>a-1.0</id>", "<id>a-1.0</id><dependencies/>", 1))
	staleA, goneB := filepath.Base(profileDir(cache, old, "a-1.0")), filepath.Base(profileDir(cache, old, "b-2.0"))
	keepA := filepath.Base(profileDir(cache, now, "a-1.0"))
	other := filepath.Base(profileDir(cache, Manifest{Name: "u", POM: []byte(testPOM)}, "a-1.0"))
	dirs := []string{staleA, goneB, keepA, other, "workers-" + staleA + "-Main-0123", "workers-" + keepA + "-Main-0123", "m2", "t-notes"}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(cache, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Sweep(cache, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{staleA, goneB, "workers-" + staleA + "-Main-0123"}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("Sweep removed %v, want %v", removed, want)
	}
	left, _ := os.ReadDir(cache)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	keep := []string{keepA, other, "workers-" + keepA + "-Main-0123", "m2", "t-notes"}
	slices.Sort(keep)
	if !slices.Equal(names, keep) {
		t.Errorf("left %v, want %v", names, keep)
	}
	if removed, err := Sweep(filepath.Join(cache, "none"), now); err != nil || len(removed) != 0 {
		t.Errorf("Sweep of a missing cache = %v, %v; want nothing", removed, err)
	}
}

// TestVerify: the jars a fetch copied must be the lock file's, name for name and hash
// for hash; a profile it does not list is refused with the lines to add; a broken
// line names the file and line.
func TestVerify(t *testing.T) {
	lib := t.TempDir()
	for name, content := range map[string]string{"a.jar": "A", "b.jar": "B"} {
		if err := os.WriteFile(filepath.Join(lib, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hashes, err := jarHashes(lib)
	if err != nil {
		t.Fatal(err)
	}
	line := func(profile, jar, sum string) string { return profile + " " + jar + " " + sum + "\n" }
	good := "# comment\n" + line("a-1.0", "a.jar", hashes["a.jar"]) + line("a-1.0", "b.jar", hashes["b.jar"]) + line("b-2.0", "c.jar", hashes["a.jar"])
	for _, c := range []struct {
		name, lock, want string // want: a piece of the error ("": none)
	}{
		{"as locked", good, ""},
		{"another hash", strings.Replace(good, hashes["b.jar"], hashes["a.jar"], 1), "t.lock:3: b.jar has sha256 " + hashes["b.jar"]},
		{"a jar not listed", "# comment\n" + line("a-1.0", "a.jar", hashes["a.jar"]), "Maven copied b.jar, which t.lock does not list"},
		{"a listed jar missing", good + line("a-1.0", "d.jar", hashes["a.jar"]), "t.lock:5: d.jar was not copied"},
		{"a profile not listed", line("b-2.0", "c.jar", hashes["a.jar"]), "t.lock lists no jar of the profile; after checking them, add:\na-1.0 a.jar " + hashes["a.jar"]},
		{"a broken line", good + "a-1.0 a.jar\n", "t.lock:5: want PROFILE JAR SHA256"},
	} {
		m := Manifest{Name: "t", POM: []byte(testPOM), Lock: []byte(c.lock), LockFile: "t.lock"}
		err := m.verify("a-1.0", lib)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if err := (Manifest{Name: "t", POM: []byte(testPOM)}).verify("a-1.0", lib); err != nil {
		t.Errorf("a manifest without a lock: %v", err)
	}
}
