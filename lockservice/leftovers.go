package lockservice

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Running reports whether process pid exists and is no zombie (one that died but
// that its parent has not yet waited for).
func Running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// NSID identifies a network namespace (its nsfs inode).
type NSID struct{ dev, ino uint64 }

// NetnsOf is the network namespace of process pid (zero when unknown).
func NetnsOf(pid int) NSID {
	return statNS(fmt.Sprintf("/proc/%d/ns/net", pid))
}

func statNS(path string) NSID {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return NSID{}
	}
	return NSID{dev: uint64(st.Dev), ino: st.Ino}
}

// NSIndex names the tool's namespaces by identity. A namespace is made before any
// process runs in it, so one a process is in that the index does not know is looked
// for again on a fresh listing (a run that started meanwhile) before it is taken
// for gone.
type NSIndex struct{ names map[NSID]string }

// NewNSIndex indexes the tool's namespaces that exist now.
func NewNSIndex() (*NSIndex, error) {
	x := &NSIndex{}
	return x, x.refresh()
}

func (x *NSIndex) refresh() error {
	names, err := netns.List()
	if err != nil {
		return err
	}
	x.names = map[NSID]string{}
	for _, n := range names {
		if id := statNS(filepath.Join("/run/netns", n)); id != (NSID{}) {
			x.names[id] = n
		}
	}
	return nil
}

// Lookup names namespace id, ok false when it is none of the tool's that exist.
func (x *NSIndex) Lookup(id NSID) (name string, ok bool, err error) {
	if name, ok = x.names[id]; ok {
		return name, true, nil
	}
	if err := x.refresh(); err != nil {
		return "", false, err
	}
	name, ok = x.names[id]
	return name, ok, nil
}
