package rundir

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// List finds every run under store, newest first (by the run directory's name, then
// by ID). A run is a directory that holds a regular results.json (a checked run), at
// most MaxDepth levels down: STORE/TEST/STAMP, and also a store kept inside the store
// (store/chaos/TEST/STAMP). Symbolic links (the latest links) are not followed, and an
// unreadable corner of the store hides only itself.
func List(store string) ([]Entry, error) {
	root, err := os.OpenRoot(store)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return ListRoot(root)
}

// ListRoot is List of the store opened as root (so that nothing outside it is read).
func ListRoot(root *os.Root) ([]Entry, error) {
	var runs []Entry
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil
		}
		if p == "." || !d.IsDir() {
			return nil
		}
		if fi, err := root.Lstat(p + "/" + Results); err == nil && fi.Mode().IsRegular() {
			runs = append(runs, Entry{ID: p, Stamp: path.Base(p)})
			return fs.SkipDir
		}
		if strings.Count(p, "/")+1 >= MaxDepth {
			return fs.SkipDir
		}
		return nil
	})
	sort.SliceStable(runs, func(i, j int) bool {
		if runs[i].Stamp != runs[j].Stamp {
			return runs[i].Stamp > runs[j].Stamp
		}
		return runs[i].ID < runs[j].ID
	})
	return runs, err
}

// Remove removes the run directory d of test TEST in store STORE and points the
// test's latest link at the newest run left, and STORE/latest too if it pointed at d;
// when no run of the test is left, the test's directory and those links go.
func Remove(store, test string, d Dir) error {
	if err := os.RemoveAll(string(d)); err != nil {
		return err
	}
	base := filepath.Join(store, test)
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	var stamps []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != Latest {
			stamps = append(stamps, e.Name())
		}
	}
	sort.Strings(stamps) // stamps sort by time
	storeLink := filepath.Join(store, Latest)
	storeTarget, _ := os.Readlink(storeLink)
	pointsHere := storeTarget == filepath.Join(test, filepath.Base(string(d)))
	_ = os.Remove(filepath.Join(base, Latest))
	if pointsHere {
		_ = os.Remove(storeLink)
	}
	if len(stamps) == 0 {
		return os.Remove(base)
	}
	return pointLatest(store, test, stamps[len(stamps)-1], pointsHere)
}
