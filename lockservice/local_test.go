package lockservice

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSweepLocalsRemovesOnlyTheDead: the sweep removes a private server's directory
// whose owner let go of its lock (died), and one long left without an owner file;
// it keeps one whose owner holds the lock, one just made, and what is not ours.
func TestSweepLocalsRemovesOnlyTheDead(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	live, owner, err := ownedLocalDir("redis")
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	dead, gone, err := ownedLocalDir("postgres")
	if err != nil {
		t.Fatal(err)
	}
	gone.Close() // its owner died: the lock is let go
	fresh := filepath.Join(tmp, LocalDirPattern+"mariadb.1")
	stale := filepath.Join(tmp, LocalDirPattern+"mariadb.2")
	other := filepath.Join(tmp, "zlc-something-else")
	for _, d := range []string{fresh, stale, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	left, err := sweepLocals()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Kind != "mariadb" && left[1].Kind != "mariadb" {
		t.Errorf("swept %+v, want the dead postgres and the stale mariadb directories", left)
	}
	for dir, want := range map[string]bool{live: true, dead: false, fresh: true, stale: false, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", dir, err == nil, want)
		}
	}
	if !InLiveLocal(filepath.Join(live, "s1", "redis.conf")) || InLiveLocal(filepath.Join(dead, "x")) || InLiveLocal(filepath.Join(other, "x")) {
		t.Errorf("InLiveLocal: live %v, dead %v, not a Local's %v; want true, false, false",
			InLiveLocal(filepath.Join(live, "s1", "redis.conf")), InLiveLocal(filepath.Join(dead, "x")), InLiveLocal(filepath.Join(other, "x")))
	}
	// The live owner still holds its lock: nobody else can take it.
	f, err := os.Open(filepath.Join(live, localOwnerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Error("took the live owner's lock")
	}
}
