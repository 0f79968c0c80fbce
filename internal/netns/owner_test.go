package netns

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestOwnerLiveness: an owner file is live while its lock is held, or while the pid
// it names runs and started before it was written; dead otherwise (a killed owner, a
// reused pid), and a dead one's id can be claimed again.
func TestOwnerLiveness(t *testing.T) {
	requireRoot(t)
	id := "to" + RandomID()[:5]
	o, err := claimOwner(id)
	if err != nil {
		t.Fatal(err)
	}
	defer o.release()
	path := ownerFile(id)
	if !ownerAlive(path) || !Owned(Prefix+id+"hub") {
		t.Fatal("a held owner file is not live")
	}
	if _, err := claimOwner(id); err == nil {
		t.Fatal("claimed the id of a live owner")
	}
	// A file naming this process but held by nobody: live (the pid runs, started
	// before the file).
	o.release()
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !ownerAlive(path) {
		t.Error("an owner file naming this running process is not live")
	}
	// Written before its pid's process started: a reused pid, dead.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if ownerAlive(path) {
		t.Error("an owner file older than its pid's process is live")
	}
	// A dead pid: dead, removed, and the id is free again.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ownerAlive(path) || Owned(Prefix+id+"hub") {
		t.Error("an owner file naming a dead pid is live")
	}
	o2, err := claimOwner(id)
	if err != nil {
		t.Fatalf("claim after a dead owner: %v", err)
	}
	o2.release()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("owner file left after release: %v", err)
	}
}
