package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeRow is a row of one of the README's tables: its cells, trimmed.
type readmeRow []string

// readmeTable returns the rows of the first table under the README's heading (a
// line "## "+heading), without its header and separator rows.
func readmeTable(t *testing.T, heading string) []readmeRow {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []readmeRow
	in, header := false, 0
	for _, line := range strings.Split(string(text), "\n") {
		switch {
		case line == "## "+heading:
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "## "):
			in = false
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 || header > 0 {
				break // the table ended
			}
			continue
		}
		if header < 2 { // the header and the |---| row
			header++
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("README.md: no table under \"## %s\"", heading)
	}
	return rows
}

// backticked is what a Markdown text puts in backticks, in order.
var backticked = regexp.MustCompile("`([^`]+)`")

// ticks returns the backticked words of s, a trailing "/" dropped.
func ticks(s string) []string {
	var words []string
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		words = append(words, strings.TrimSuffix(m[1], "/"))
	}
	return words
}

// goPackageDirs returns the directories under root (slash paths relative to it) that
// hold a Go package: a .go file that is not a test. It skips testdata, store, build,
// bin, node_modules and hidden directories. isMain says which are commands.
func goPackageDirs(t *testing.T, root string) (dirs []string, isMain map[string]bool) {
	t.Helper()
	skip := map[string]bool{"testdata": true, "store": true, "build": true, "bin": true, "node_modules": true}
	isMain = map[string]bool{}
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (skip[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !seen[rel] {
			seen[rel] = true
			dirs = append(dirs, rel)
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			isMain[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no Go package under %s", root)
	}
	return dirs, isMain
}

// TestREADMELayoutTableMatchesTree holds the README's Layout table (folder | role |
// why it is here) to the tree:
//
//   - every folder a row names (each backticked path of its first cell) is a
//     directory of the repository;
//   - every Go package directory (a non-test .go file; testdata, store, build, bin,
//     node_modules and hidden directories skipped) is covered, by the first of:
//     1. a row names it in its folder cell (`harness/explore`);
//     2. the row of its nearest named ancestor names it in backticks in its "why"
//     text, by its path from the repository's root or from that row's folder (the
//     `recipes/` row says `recipes/zlcmutex`, the `internal/` row says `netns`);
//     3. it is a command (package main) and its parent directory is covered: a
//     helper command rides with the package it serves (internal/testnodes/cmd with
//     `testnodes`, bench/genhistory with `bench/`).
func TestREADMELayoutTableMatchesTree(t *testing.T) {
	root := filepath.Join("..", "..")
	rows := readmeTable(t, "Layout")
	why := map[string]map[string]bool{} // folder -> the words its row's why text backticks
	for _, row := range rows {
		if len(row) < 3 {
			t.Errorf("README.md's Layout table: row %q has not 3 cells (folder, role, why)", strings.Join(row, " | "))
			continue
		}
		folders := ticks(row[0])
		if len(folders) == 0 {
			t.Errorf("README.md's Layout table: row %q names no folder in backticks", row[0])
		}
		words := map[string]bool{}
		for _, w := range ticks(row[2]) {
			words[w] = true
		}
		for _, f := range folders {
			if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err != nil || !st.IsDir() {
				t.Errorf("README.md's Layout table has a row for `%s`, which is not a directory of the tree", f)
			}
			why[f] = words
		}
	}
	dirs, isMain := goPackageDirs(t, root)
	var covered func(dir string) bool
	covered = func(dir string) bool {
		if _, ok := why[dir]; ok {
			return true
		}
		for a := path.Dir(dir); a != "."; a = path.Dir(a) {
			if words, ok := why[a]; ok {
				if words[dir] || words[strings.TrimPrefix(dir, a+"/")] {
					return true
				}
				break
			}
		}
		return isMain[dir] && path.Dir(dir) != "." && covered(path.Dir(dir))
	}
	for _, dir := range dirs {
		if covered(dir) {
			continue
		}
		where := "a row of its own"
		for a := path.Dir(dir); a != "."; a = path.Dir(a) {
			if _, ok := why[a]; ok {
				where = "a row of its own, or `" + strings.TrimPrefix(dir, a+"/") + "` in backticks in the `" + a + "` row's why text"
				break
			}
		}
		t.Errorf("README.md's Layout table leaves out the Go package %s: give it %s", dir, where)
	}
}

// TestREADMECommandsTableMatchesUsage: the README's Commands table has a row for
// every command main.go's usage lists under "commands:", and no other.
func TestREADMECommandsTableMatchesUsage(t *testing.T) {
	var listed []string
	_, after, ok := strings.Cut(usage, "\ncommands:\n")
	if !ok {
		t.Fatal(`usage has no "commands:" line`)
	}
	for _, line := range strings.Split(after, "\n") {
		if strings.TrimSpace(line) == "" {
			break
		}
		listed = append(listed, strings.Fields(line)[0])
	}
	if len(listed) == 0 {
		t.Fatal(`usage lists no command under "commands:"`)
	}
	var rows []string
	for _, row := range readmeTable(t, "Commands") {
		words := ticks(row[0])
		if len(words) != 1 {
			t.Errorf("README.md's Commands table: row %q does not name one command in backticks", row[0])
			continue
		}
		rows = append(rows, words[0])
	}
	for _, c := range listed {
		if !slices.Contains(rows, c) {
			t.Errorf("README.md's Commands table has no row for `%s`, which main.go's usage lists", c)
		}
	}
	for _, c := range rows {
		if !slices.Contains(listed, c) {
			t.Errorf("README.md's Commands table has a row for `%s`, which main.go's usage does not list", c)
		}
	}
}
