package etcd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestClusterServesAndShowsItsLock starts three of Debian's members, and reads a lock
// as the harness does: its keys in create-revision order, each key's lease, the live
// leases; session-expire's revoke removes a holder's key; Close leaves no member.
func TestClusterServesAndShowsItsLock(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.Etcd)
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.Etcd, Nodes: 3})
	e := f.Service.(*Etcd)
	ctx := context.Background()
	if v := e.Version(ctx); !strings.HasPrefix(v, "3.4.") {
		t.Errorf("Version = %q, want Debian's 3.4", v)
	}
	if id, ok := e.Leader(ctx); !ok || id < 1 || id > 3 {
		t.Errorf("Leader = %d, %v", id, ok)
	}
	if got := e.Connect(); got != "10.77.1.1:2379,10.77.1.2:2379,10.77.1.3:2379" {
		t.Errorf("Connect = %q", got)
	}
	c, err := e.admin()
	if err != nil {
		t.Fatal(err)
	}
	var leases []clientv3.LeaseID
	for range 2 {
		l, err := c.Grant(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l.ID)
		if _, err := c.Put(ctx, fmt.Sprintf("/zlc/l0/%x", l.ID), "", clientv3.WithLease(l.ID)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.OpenLock(ctx, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock := lockservice.PathLock("/zlc/l0")
	entries, err := r.Entries(lock, true)
	want := []string{fmt.Sprintf("%x", leases[0]), fmt.Sprintf("%x", leases[1])}
	if err != nil || strings.Join(entries, ",") != strings.Join(want, ",") {
		t.Errorf("Entries = %v, %v; want %v (create-revision order)", entries, err, want)
	}
	if owner, ok, err := r.Owner(lock, want[1]); err != nil || !ok || owner != SessionName(int64(leases[1])) {
		t.Errorf("Owner = %q, %v, %v", owner, ok, err)
	}
	// A library's own key outside the lock's prefix (Python etcd3's /locks/NAME) is
	// read when a worker's place names it.
	own := "/locks/zlc/l0/lock"
	if _, err := c.Put(ctx, own, "", clientv3.WithLease(leases[1])); err != nil {
		t.Fatal(err)
	}
	placed := lockservice.Lock{Path: "/zlc/l0", Places: []workloads.LockPlace{{Keys: []string{own}}}}
	if entries, err := r.Entries(placed, true); err != nil || strings.Join(entries, ",") != strings.Join(append(want, own), ",") {
		t.Errorf("with a place: Entries = %v, %v; want %v", entries, err, append(want, own))
	}
	if owner, ok, err := r.Owner(placed, own); err != nil || !ok || owner != SessionName(int64(leases[1])) {
		t.Errorf("Owner of the place's key = %q, %v, %v", owner, ok, err)
	}
	lockservicetest.CheckLive(t, e.LiveSessions(ctx), SessionName(int64(leases[0])), SessionName(int64(leases[1])))
	if _, err := e.ExpireSession(ctx, SessionName(int64(leases[0]))); err != nil {
		t.Fatal(err)
	}
	if entries, err := r.Entries(lock, true); err != nil || len(entries) != 1 || entries[0] != want[1] {
		t.Errorf("after the revoke: Entries = %v, %v", entries, err)
	}
	lockservicetest.WaitLive(t, e.LiveSessions, SessionName(int64(leases[0])), false)
	if _, ok, _ := r.Owner(lock, want[0]); ok {
		t.Error("the revoked lease's key still has an owner")
	}
	if err := e.MakeCounter(ctx, 0, "/zlc/counter"); err != nil {
		t.Fatal(err)
	}
	if v, err := e.ReadCounter(ctx, 0, "/zlc/counter"); err != nil || v != 0 {
		t.Errorf("ReadCounter = %d, %v", v, err)
	}
	if left, err := FindLeft(); err != nil || len(left) != 0 {
		t.Errorf("FindLeft lists a live run's members: %v, %v", left, err)
	}
}

// TestReleaseServes starts one member of each release make setup built.
func TestReleaseServes(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2)
	cache, err := maven.CacheDir(os.Getenv("ZLC_CACHE_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Releases() {
		t.Run(v, func(t *testing.T) {
			if _, err := binary(v, cache); err != nil {
				t.Fatalf("%v (make setup builds every release)", err)
			}
			f := lockservicetest.Start(t, lockservice.Config{Kind: kind.Etcd, Nodes: 1, Settings: Config{Settings: Settings{Version: v}, Nodes: 1}})
			if got := f.Service.Version(context.Background()); got != v {
				t.Errorf("Version = %q, want %s", got, v)
			}
		})
	}
}

// TestMemberThatWillNotStart: a member whose ports are taken, and a binary that is not
// etcd, are errors that name the member and quote its log; nothing is left.
func TestMemberThatWillNotStart(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.Etcd)
	dir := t.TempDir()
	// The "binary" starts an etcd of its own on the member's ports first.
	squatter := filepath.Join(dir, "squat.sh")
	a := lockservice.ServerAddr(1)
	script := fmt.Sprintf("#!/bin/sh\n%[3]s --data-dir %[1]s/squat --listen-client-urls http://%[2]s:2379 --advertise-client-urls http://%[2]s:2379 --listen-peer-urls http://%[2]s:2380 >/dev/null 2>&1 &\nsleep 1\nexec %[3]s \"$@\"\n", dir, a, debianBinary)
	fake := filepath.Join(dir, "fake-etcd.sh")
	for path, text := range map[string]string{squatter: script, fake: "#!/bin/sh\necho 'fake: no etcd here' >&2\nexit 3\n"} {
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		binary string
		want   []string
	}{
		{squatter, []string{"member 1 exited", "address already in use"}},
		{fake, []string{"member 1 exited", "fake: no etcd here"}},
	} {
		t.Run(filepath.Base(c.binary), func(t *testing.T) {
			n, id := lockservicetest.Net(t)
			e, err := Start(context.Background(), n, Config{Nodes: 1, Dir: filepath.Join(dir, filepath.Base(c.binary)+".d"), Binary: c.binary, StartTimeout: 10 * time.Second}, id)
			if e != nil {
				if cerr := e.Close(); cerr != nil {
					t.Error(cerr)
				}
			}
			if err == nil {
				log, _ := os.ReadFile(filepath.Join(dir, filepath.Base(c.binary)+".d", "zlc"+id+"s1", "server.log"))
				t.Fatalf("no error; the member's log:\n%s", log)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	if out, _ := exec.Command("pgrep", "-f", dir).Output(); len(out) > 0 {
		t.Errorf("processes left behind: %s", out)
	}
	if _, err := Start(context.Background(), nil, Config{Nodes: 1, Settings: Settings{Version: "3.9.9"}}, "x"); err == nil || !strings.Contains(err.Error(), "etcd-version") {
		t.Errorf("a version not pinned: %v", err)
	}
	if _, err := Start(context.Background(), nil, Config{Nodes: 1, Settings: Settings{Version: "3.6.16"}, CacheDir: t.TempDir()}, "x"); err == nil || !strings.Contains(err.Error(), "not built") || !strings.Contains(err.Error(), "zlockcheck fetch") {
		t.Errorf("a version not built: %v", err)
	}
}

// TestLocalServes starts conformance's private member and ends a lease through it.
func TestLocalServes(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Etcd)
	ctx := context.Background()
	l, err := lockservice.StartLocal(ctx, kind.Etcd, lockservice.LocalConfig{SessionTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{l.Connect()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lease, err := c.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.End(ctx, lockservice.Holder{Session: "nonsense"}); err == nil || !strings.Contains(err.Error(), "no lease id") {
		t.Errorf("End(nonsense) = %v", err)
	}
	ending, err := l.End(ctx, lockservice.Holder{Session: SessionName(int64(lease.ID))})
	if err != nil || !ending.MustReport {
		t.Fatalf("End = %+v, %v", ending, err)
	}
	if ttl, err := c.TimeToLive(ctx, lease.ID); err != nil || ttl.TTL != -1 {
		t.Errorf("the lease lives on: %+v, %v", ttl, err)
	}
}

// TestCleanupKillsOnlyTheToolsLeftovers: a member whose namespace was deleted under
// it is found by its configuration and killed; the members of a live run are left
// alone.
func TestCleanupKillsOnlyTheToolsLeftovers(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.Etcd)
	live := lockservicetest.Start(t, lockservice.Config{Kind: kind.Etcd, Nodes: 1}).Service.(*Etcd)
	n, id := lockservicetest.Net(t)
	e, err := Start(context.Background(), n, Config{Nodes: 1, Dir: t.TempDir()}, id)
	if e != nil {
		t.Cleanup(func() { _ = e.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	orphan := e.Members[0]
	pid := orphan.Host.Pid()
	if out, err := exec.Command("ip", "netns", "delete", orphan.Host.String()).CombinedOutput(); err != nil {
		t.Fatalf("ip netns delete: %v: %s", err, out)
	}
	left, err := Cleanup()
	if err != nil || len(left) != 1 || left[0].Pid != pid || left[0].Conf != orphan.Conf {
		t.Fatalf("Cleanup = %+v, %v; want only the orphaned member (pid %d, %s)", left, err, pid, orphan.Conf)
	}
	if lockservice.Running(pid) {
		t.Error("the orphaned member still runs")
	}
	if live.Members[0].Host.Pid() == 0 {
		t.Error("Cleanup killed a live run's member")
	}
}
