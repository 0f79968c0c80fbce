package recipes

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	nodeworkers "github.com/zlockcheck/zlockcheck/recipes/node"
	pyworkers "github.com/zlockcheck/zlockcheck/recipes/python"
	"github.com/zlockcheck/zlockcheck/workloads"
)

func TestCatalog(t *testing.T) {
	var names []string
	for _, r := range Catalog() {
		names = append(names, r.Name)
	}
	want := "curator-5.9-mutex,curator-5.9-reentrant,curator-5.9-rwlock,curator-5.9-semaphore,curator-mutex,curator-reentrant,curator-rwlock,curator-semaphore,etcd-election,etcd-mutex,etcd-mutex-trylock,etcd-mutex-unlock-retried,etcd-mutex-validity,etcd-node-lock,etcd-python-lock,gozk,kazoo-2.11-lock,kazoo-2.11-rwlock,kazoo-2.11-semaphore,kazoo-lock,kazoo-rwlock,kazoo-semaphore," +
		"mariadb-getlock,node-redlock,pals-lock,pg-advisory,pg-table,pg-table-expiry," +
		"pottery-redlock,python-redis-lock,redis-lock,redis-lock-wait,redis-py-lock,redis-semaphore-mutex,redislock,redisson-fenced,redisson-lock,redisson-lock-lease,redisson-redlock,redsync,redsync-one-cluster," +
		"spring-jdbc-mariadb,spring-jdbc-postgres,spring-redis-lock,spring-redis-lock-renewed,zlc-mutex," +
		"mutant-delete-lowest,mutant-etcd-ignore-done,mutant-etcd-no-wait,mutant-etcd-revision-before-put,mutant-etcd-unlock-retried,mutant-herd,mutant-ignore-lost," +
		"mutant-mariadb-no-heartbeat,mutant-mariadb-pool,mutant-mariadb-unlock-once,mutant-missed-wakeup," +
		"mutant-no-recheck,mutant-off-by-one," +
		"mutant-pg-advisory-no-heartbeat,mutant-pg-advisory-pool,mutant-pg-advisory-unlock-once,mutant-pg-advisory-xact-lock," +
		"mutant-pg-table-blind-retry,mutant-pg-table-delete-by-name,mutant-pg-table-takeover-keeps-token," +
		"mutant-redis-blind-del,mutant-redis-blind-extend,mutant-redis-extend-recreates,mutant-redis-ignore-validity,mutant-redis-no-expiry,mutant-redis-setnx-then-expire,mutant-redis-static-value," +
		"mutant-redlock-minority,mutant-redlock-no-elapsed-check,mutant-swallowed-release,mutant-unprotected-create,mutant-withdrawn-watch"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("Catalog() names = %s, want %s", got, want)
	}
	for _, r := range Catalog() {
		if r.Doc == "" || strings.Contains(r.Doc, "\n") {
			t.Errorf("%s: Doc = %q, want one line", r.Name, r.Doc)
		}
		if r.Mutant != strings.HasPrefix(r.Name, "mutant-") {
			t.Errorf("%s: Mutant = %v", r.Name, r.Mutant)
		}
		if (r.New != nil) != (r.Runtime == InProcess) {
			t.Errorf("%s: runtime %s with New set %v: only InProcess recipes have a constructor", r.Name, r.Runtime, r.New != nil)
		}
		if len(r.Kinds) == 0 {
			t.Errorf("%s: no workload kinds", r.Name)
		}
		for _, k := range r.Kinds {
			if _, err := workloads.ParseKind(string(k)); err != nil {
				t.Errorf("%s: %v", r.Name, err)
			}
		}
		if r.Library.Name == "" {
			t.Errorf("%s: no library named", r.Name)
		}
		redisName := strings.HasPrefix(r.Name, "redis") || strings.HasPrefix(r.Name, "redsync") || strings.HasPrefix(r.Name, "python-redis-") || strings.HasPrefix(r.Name, "pottery-") ||
			r.Name == "node-redlock" || strings.HasPrefix(r.Name, "mutant-redis-") || strings.HasPrefix(r.Name, "mutant-redlock-")
		wantService := map[bool]kind.Name{true: kind.Redis, false: ""}[redisName]
		switch {
		case strings.HasPrefix(r.Name, "pg-") || strings.HasPrefix(r.Name, "mutant-pg-") || strings.HasPrefix(r.Name, "pals-"):
			wantService = kind.Postgres
		case strings.HasPrefix(r.Name, "mariadb-") || strings.HasPrefix(r.Name, "mutant-mariadb-"):
			wantService = kind.MariaDB
		case strings.HasPrefix(r.Name, "etcd-") || strings.HasPrefix(r.Name, "mutant-etcd-"):
			wantService = kind.Etcd
		case strings.HasPrefix(r.Name, "spring-"): // spring-<registry>-<service>, or spring-redis-*
			wantService = map[string]kind.Name{"spring-jdbc-postgres": kind.Postgres, "spring-jdbc-mariadb": kind.MariaDB}[r.Name]
			if strings.HasPrefix(r.Name, "spring-redis-") {
				wantService = kind.Redis
			}
		}
		if wantRedLock := r.Name == "redsync" || r.Name == "redisson-redlock" || r.Name == "pottery-redlock" || r.Name == "node-redlock" || strings.HasPrefix(r.Name, "mutant-redlock-"); r.RedLock != wantRedLock {
			t.Errorf("%s: RedLock = %v, want %v", r.Name, r.RedLock, wantRedLock)
		}
		if r.Service != wantService {
			t.Errorf("%s: Service = %q, want %q", r.Name, r.Service, wantService)
		}
		if got, err := Find(r.Name); err != nil || got.Name != r.Name {
			t.Errorf("Find(%s) = %s, %v", r.Name, got.Name, err)
		}
	}
	_, err := Find("nope")
	if err == nil || !strings.Contains(err.Error(), "kazoo-lock") || strings.Contains(err.Error(), "mutant-") {
		t.Errorf("Find(nope) = %v, want an error listing the real recipes only", err)
	}
}

func TestPackages(t *testing.T) {
	for name, want := range map[string]string{
		"gozk":          "",
		"kazoo-rwlock":  "python3 python3-kazoo",
		"curator-mutex": "default-jdk-headless libcurator-recipes-java libslf4j-java",
		// Curator 5.9 comes from Maven Central: the JDK and Maven from Debian.
		"curator-5.9-mutex":    "default-jdk-headless maven",
		"redisson-lock":        "default-jdk-headless maven",
		"spring-jdbc-postgres": "default-jdk-headless maven",
		// redis-py comes from PyPI into a virtual environment: Debian's venv module.
		"redis-py-lock": "python3 python3-venv",
		// npm's libraries come with npm, which NodeSource's nodejs carries.
		"redis-semaphore-mutex": "nodejs",
	} {
		r, err := Find(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.Packages(), " "); got != want {
			t.Errorf("%s: Packages() = %q, want %q", name, got, want)
		}
	}
}

// TestReleases: each Curator and Kazoo recipe again with the release from Maven
// Central or PyPI, the same worker told the recipe it is a release of, its version
// the release's.
func TestReleases(t *testing.T) {
	for _, c := range []struct {
		bases   []string
		prefix  string // the release's recipes: prefix + the base's name less its family
		family  string
		lib     Library
		worker  string
		runtime Runtime
		version string
	}{
		{[]string{"curator-mutex", "curator-semaphore", "curator-rwlock", "curator-reentrant"}, "curator-5.9", "curator",
			Library{Name: "Curator", Maven: "curator-5.9.0"}, "", Java, "Curator 5.9.0 (Maven Central)"},
		{[]string{"kazoo-lock", "kazoo-semaphore", "kazoo-rwlock"}, "kazoo-2.11", "kazoo",
			Library{Name: "Kazoo", PyPI: "kazoo==2.11.0"}, "kazoo_worker.py", Python, "Kazoo 2.11.0 (PyPI)"},
	} {
		for _, base := range c.bases {
			b, err := Find(base)
			if err != nil {
				t.Fatal(err)
			}
			name := c.prefix + strings.TrimPrefix(base, c.family)
			r, err := Find(name)
			if err != nil {
				t.Fatal(err)
			}
			if r.WorkerRecipe() != base || b.WorkerRecipe() != base || r.Worker != c.worker || b.Worker != r.Worker {
				t.Errorf("%s tells %q %q, %s tells %q %q; want %s", name, r.Worker, r.WorkerRecipe(), base, b.Worker, b.WorkerRecipe(), base)
			}
			if r.Library != c.lib || r.Runtime != c.runtime {
				t.Errorf("%s: library %+v, runtime %s", name, r.Library, r.Runtime)
			}
			if got := r.Version(); got != c.version {
				t.Errorf("%s: Version() = %q, want %q", name, got, c.version)
			}
			if strings.Join(kindNames(r.Kinds), ",") != strings.Join(kindNames(b.Kinds), ",") || !strings.Contains(r.Doc, strings.Fields(c.version)[0]+" "+strings.Fields(c.version)[1]+"'s") {
				t.Errorf("%s: kinds %v doc %q, want %s's kinds and the release in the doc", name, r.Kinds, r.Doc, base)
			}
		}
	}
}

func kindNames(ks []workloads.Kind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, string(k))
	}
	return out
}

// TestPythonRecipesArePinned: every Python recipe of PyPI names its library as
// recipes/python/requirements.txt pins it (its version is what a run records), and
// its worker is a script the package carries.
func TestPythonRecipesArePinned(t *testing.T) {
	req := string(pyworkers.Requirements().Text)
	if err := pyworkers.Requirements().Check(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range Catalog() {
		if r.Library.PyPI == "" {
			continue
		}
		n++
		if r.Runtime != Python {
			t.Errorf("%s: runtime %s, want python", r.Name, r.Runtime)
		}
		if !strings.Contains(req, "\n"+r.Library.PyPI+" ") {
			t.Errorf("%s: %s is not pinned in recipes/python/requirements.txt", r.Name, r.Library.PyPI)
		}
		if _, err := fs.Stat(pyworkers.Files(), r.Worker); err != nil {
			t.Errorf("%s: worker %q: %v", r.Name, r.Worker, err)
		}
		if v := r.Version(); !strings.HasSuffix(v, strings.SplitN(r.Library.PyPI, "==", 2)[1]+" (PyPI)") {
			t.Errorf("%s: Version() = %q", r.Name, v)
		}
	}
	if n == 0 {
		t.Fatal("no Python recipe of PyPI in the catalogue")
	}
}

// TestNodeRecipesArePinned: every Node recipe names its library as recipes/node's
// package.json pins it, exactly, and as its lock file locks it (its version is what a
// run records), and its worker is a script the package carries.
func TestNodeRecipesArePinned(t *testing.T) {
	lock := nodeworkers.Lock()
	if err := lock.Check(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range Catalog() {
		if r.Library.Npm == "" {
			continue
		}
		n++
		if r.Runtime != Node {
			t.Errorf("%s: runtime %s, want node", r.Name, r.Runtime)
		}
		at := strings.LastIndex(r.Library.Npm, "@")
		name, version := r.Library.Npm[:at], r.Library.Npm[at+1:]
		if !strings.Contains(string(lock.Package), fmt.Sprintf("%q: %q", name, version)) {
			t.Errorf("%s: %s is not pinned in recipes/node/package.json", r.Name, r.Library.Npm)
		}
		if _, err := fs.Stat(nodeworkers.Files(), r.Worker); err != nil {
			t.Errorf("%s: worker %q: %v", r.Name, r.Worker, err)
		}
		if v := r.Version(); v != r.Library.Name+" "+version+" (npm)" {
			t.Errorf("%s: Version() = %q", r.Name, v)
		}
	}
	if n == 0 {
		t.Fatal("no Node recipe in the catalogue")
	}
}
