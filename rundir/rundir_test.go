package rundir

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readlink(t *testing.T, path string) string {
	t.Helper()
	got, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCreateNamesAndLinks(t *testing.T) {
	store := t.TempDir()
	t0 := time.Date(2026, 11, 22, 7, 11, 25, 923e6, time.FixedZone("CET", 3600))
	for i, tc := range []struct {
		test, stamp string
		at          time.Time
	}{
		{"gozk-mutex", "20261122T061125.923Z", t0},
		{"gozk-mutex", "20261122T061126.000Z", t0.Add(77 * time.Millisecond)},
		{"kazoo-lock", "20261122T061127.000Z", t0.Add(1077 * time.Millisecond)},
	} {
		d, err := Create(store, tc.test, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(store, tc.test, tc.stamp); d.Path() != want {
			t.Errorf("%d: run directory %s, want %s", i, d, want)
		}
		if st, err := os.Stat(d.Path()); err != nil || !st.IsDir() {
			t.Errorf("%d: %s not made (%v)", i, d, err)
		}
		if got := readlink(t, filepath.Join(store, tc.test, Latest)); got != tc.stamp {
			t.Errorf("%d: test's latest -> %s, want %s", i, got, tc.stamp)
		}
		if got, want := readlink(t, filepath.Join(store, Latest)), filepath.Join(tc.test, tc.stamp); got != want {
			t.Errorf("%d: store's latest -> %s, want %s", i, got, want)
		}
		if at, err := ParseStamp(tc.stamp); err != nil || !at.Equal(tc.at.Truncate(time.Millisecond)) {
			t.Errorf("%d: ParseStamp(%s) = %v, %v", i, tc.stamp, at, err)
		}
	}
}

func TestPaths(t *testing.T) {
	d := Dir("s/t/x")
	for got, want := range map[string]string{
		d.HistoryPath():         "s/t/x/history.jsonl",
		d.File(Results):         "s/t/x/results.json",
		d.ServersDir():          "s/t/x/servers",
		d.ServerDir(2):          "s/t/x/servers/s2",
		d.WorkersDir():          "s/t/x/workers",
		d.WorkerLog(3, 17):      "s/t/x/workers/w3-p17.stderr.log",
		d.File(Timings):         "s/t/x/timings.json",
		d.File(Nemesis):         "s/t/x/nemesis.jsonl",
		d.File(JUnit):           "s/t/x/junit.xml",
		d.File(Timeline):        "s/t/x/timeline.html",
		d.File(Config):          "s/t/x/config.json",
		d.File(Latency):         "s/t/x/latency.png",
		d.File(Rate):            "s/t/x/rate.png",
		d.File(Linearizability): "s/t/x/linearizability.html",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}

func TestOpen(t *testing.T) {
	store := t.TempDir()
	d, err := Create(store, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d.File(Config), "{}")
	mustWrite(t, filepath.Join(store, "histonly", History), "")
	mustWrite(t, filepath.Join(store, "empty", "other.txt"), "")
	for _, tc := range []struct {
		path, err string
	}{
		{filepath.Join(store, Latest), ""},
		{filepath.Join(store, "t", Latest), ""},
		{d.Path(), ""},
		{filepath.Join(store, "histonly"), ""},
		{filepath.Join(store, "empty"), "is not a run directory"},
		{filepath.Join(store, "empty", "other.txt"), "is not a run directory"},
		{filepath.Join(store, "missing"), "no such file"},
	} {
		got, err := Open(tc.path)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Open(%s): %v", tc.path, err)
		case tc.err == "" && got.Path() != tc.path:
			t.Errorf("Open(%s) = %s, want the path as given", tc.path, got)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Open(%s): error %v, want one saying %q", tc.path, err, tc.err)
		}
	}
	s, err := Dir(filepath.Join(store, Latest)).Store()
	if want, _ := filepath.EvalSymlinks(store); err != nil || s != want {
		t.Errorf("Store() = %s, %v; want %s", s, err, want)
	}
}

func TestReadConfigIsStrict(t *testing.T) {
	type workload struct {
		Kind    string `json:"kind"`
		Permits int    `json:"permits"`
	}
	type config struct {
		Name     string   `json:"name"`
		Workload workload `json:"workload"`
	}
	for _, tc := range []struct {
		name, data, err string
	}{
		{"good", "{\n  \"name\": \"x\",\n  \"workload\": {\"kind\": \"mutex\"}\n}", ""},
		{"unknown top-level field", "{\n  \"name\": \"x\",\n  \"nmae\": \"y\"\n}", `config.json: line 3: json: unknown field "nmae"`},
		{"unknown nested field", "{\n  \"name\": \"x\",\n  \"workload\": {\n    \"kind\": \"mutex\",\n    \"permit\": 2\n  }\n}", `config.json: line 5: json: unknown field "permit"`},
		{"a key in a list is no key", "{\n  \"name\": \"x\",\n  \"workload\": {\"kind\": [\"permit\"]},\n  \"permit\": 1\n}", `line 3: json: cannot unmarshal array`},
		{"wrong type", "{\n  \"name\": \"x\",\n  \"workload\": {\n    \"permits\": \"two\"\n  }\n}", `config.json: line 4: json: cannot unmarshal string into Go struct field`},
		{"syntax", "{\n  \"name\": \"x\",\n  \"workload\": {\"kind\": \"mutex\",\n}}", `config.json: line 4: invalid character`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Dir(t.TempDir())
			mustWrite(t, d.File(Config), tc.data)
			var c config
			err := d.ReadConfig(&c)
			if tc.err == "" {
				if err != nil || c.Workload.Kind != "mutex" {
					t.Fatalf("got %+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), d.File(Config)) {
				t.Errorf("error %v, want %s: ... %q", err, d.File(Config), tc.err)
			}
		})
	}
}

func TestWriteAndReadJSON(t *testing.T) {
	d := Dir(t.TempDir())
	if err := d.WriteJSON(Results, map[string]any{"verdict": "valid", "ops": 3}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(d.File(Results))
	if want := "{\n  \"ops\": 3,\n  \"verdict\": \"valid\"\n}\n"; err != nil || string(data) != want {
		t.Errorf("results.json %q (%v), want %q", data, err, want)
	}
	var r struct {
		Verdict string `json:"verdict"`
	}
	if err := d.ReadResults(&r); err != nil || r.Verdict != "valid" || !d.Has(Results) || d.Has(Config) {
		t.Errorf("read back %+v, %v", r, err)
	}
	mustWrite(t, d.File(Results), "{")
	if err := d.ReadResults(&r); err == nil || !strings.Contains(err.Error(), d.File(Results)) {
		t.Errorf("broken results.json: %v", err)
	}
}

func TestListFindsNestedStores(t *testing.T) {
	store := t.TempDir()
	runs := []string{
		"gozk-mutex/20261122T010000.000Z",
		"gozk-mutex/20261122T030000.000Z",
		"chaos/kazoo-lock/20261122T020000.000Z",
		"a/b/c/d/20261122T040000.000Z", // depth 5: too deep
		"a/b/c/20261122T000000.000Z",   // depth 4: the deepest listed
		"zz/20261122T030000.000Z",      // same stamp: by ID
	}
	for _, r := range runs {
		mustWrite(t, filepath.Join(store, r, Results), "{}")
	}
	mustWrite(t, filepath.Join(store, "gozk-mutex/20261122T050000.000Z", History), "") // not checked
	mustWrite(t, filepath.Join(store, "odd/20261122T060000.000Z", Results, "x"), "")   // results.json a directory
	if err := os.Symlink("20261122T030000.000Z", filepath.Join(store, "gozk-mutex", Latest)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("gozk-mutex/20261122T030000.000Z", filepath.Join(store, Latest)); err != nil {
		t.Fatal(err)
	}
	got, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		if e.Stamp != filepath.Base(e.ID) {
			t.Errorf("%+v: stamp is not the directory's name", e)
		}
		ids = append(ids, e.ID)
	}
	want := []string{"gozk-mutex/20261122T030000.000Z", "zz/20261122T030000.000Z", "chaos/kazoo-lock/20261122T020000.000Z", "gozk-mutex/20261122T010000.000Z", "a/b/c/20261122T000000.000Z"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("List: %q\nwant %q", ids, want)
	}
	if _, err := List(filepath.Join(store, "missing")); err == nil {
		t.Error("a missing store lists without an error")
	}
}

func TestRemoveRepointsLatest(t *testing.T) {
	store := t.TempDir()
	base := filepath.Join(store, "gozk-mutex")
	stamps := []string{"20261122T010000.000Z", "20261122T020000.000Z", "20261122T030000.000Z"}
	var dirs []Dir
	for _, s := range stamps {
		at, _ := ParseStamp(s)
		d, err := Create(store, "gozk-mutex", at)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	other, err := Create(store, "other", time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		remove          Dir
		testLink, store string // "" for gone
	}{
		// store/latest points at other's run: removing a gozk-mutex run leaves it.
		{dirs[2], stamps[1], "other/20261122T040000.000Z"},
		{other, stamps[1], ""},
		{dirs[0], stamps[1], ""},
	} {
		if err := Remove(store, filepath.Base(filepath.Dir(step.remove.Path())), step.remove); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(step.remove.Path()); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", step.remove, err)
		}
		if got, _ := os.Readlink(filepath.Join(base, Latest)); got != step.testLink {
			t.Errorf("after removing %s: test's latest -> %q, want %q", step.remove, got, step.testLink)
		}
		if got, _ := os.Readlink(filepath.Join(store, Latest)); got != step.store {
			t.Errorf("after removing %s: store's latest -> %q, want %q", step.remove, got, step.store)
		}
	}
	if _, err := os.Lstat(filepath.Join(store, "other")); !os.IsNotExist(err) {
		t.Errorf("empty test directory left behind (%v)", err)
	}
	// The store's link points at the last run: removing it re-points it.
	if _, err := Create(store, "gozk-mutex", time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if err := Remove(store, "gozk-mutex", Dir(filepath.Join(base, "20261122T050000.000Z"))); err != nil {
		t.Fatal(err)
	}
	if got, want := readlink(t, filepath.Join(store, Latest)), filepath.Join("gozk-mutex", stamps[1]); got != want {
		t.Errorf("store's latest -> %q, want %q", got, want)
	}
}

func TestMatrixDir(t *testing.T) {
	at := time.Date(2026, 11, 22, 7, 11, 25, 923e6, time.UTC)
	if got, want := MatrixDir("store", at), filepath.Join("store", "matrix", "20261122T071125Z"); got != want {
		t.Errorf("MatrixDir = %s, want %s", got, want)
	}
}

// TestCreateNeverShares: two runs started in the same millisecond (explore's lanes)
// get directories of their own, the second a millisecond on.
func TestCreateNeverShares(t *testing.T) {
	store := t.TempDir()
	now := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	a, err := Create(store, "t", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(store, "t", now)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Base(string(b)) != Stamp(now.Add(time.Millisecond)) {
		t.Errorf("second run's directory %s, first's %s; want its own, a millisecond on", b, a)
	}
}
