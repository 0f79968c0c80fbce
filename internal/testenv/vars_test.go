package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// root is the checkout, from this package's directory.
const root = "../.."

// varsDoc is the page whose table of ZLC variables is written from Vars (the README
// links it); the table sits between these two markers.
const (
	varsDoc   = "docs/tests.md"
	beginVars = "<!-- ZLC variables: written from internal/testenv.Vars -->\n"
	endVars   = "<!-- end of ZLC variables -->\n"
)

func TestREADMEListsEveryVariable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, varsDoc))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	_, rest, ok := strings.Cut(text, beginVars)
	if !ok {
		t.Fatalf("%s: no line %q", varsDoc, strings.TrimSpace(beginVars))
	}
	table, _, ok := strings.Cut(rest, endVars)
	if !ok {
		t.Fatalf("%s: no line %q after the table", varsDoc, strings.TrimSpace(endVars))
	}
	if want := VarsMarkdown(); table != want {
		t.Errorf("%s's table of ZLC variables is not internal/testenv.Vars; replace it with:\n%s", varsDoc, want)
	}
}

func TestVarsAreSortedAndUnique(t *testing.T) {
	vars := Vars()
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = v.Name
		if v.Meaning == "" || v.ReadBy == "" {
			t.Errorf("%s: meaning and read-by are both needed", v.Name)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("Vars not sorted by name: %v", names)
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("Vars lists a name twice: %v", names)
	}
}

// TestEveryVariableIsListed finds every ZLC_* name in the code, scripts and Makefile
// and checks it is in Vars, and that every one in Vars is still used.
func TestEveryVariableIsListed(t *testing.T) {
	re := regexp.MustCompile(`ZLC_[A-Z_]*[A-Z]`)
	used := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "build", "store", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".sh", ".py", ".java":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range re.FindAllString(string(data), -1) {
			if _, ok := used[name]; !ok {
				used[name] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, v := range Vars() {
		listed[v.Name] = true
		if _, ok := used[v.Name]; !ok {
			t.Errorf("%s is in Vars but nothing uses it any more", v.Name)
		}
	}
	for name, path := range used {
		if !listed[name] {
			t.Errorf("%s (used in %s) is not in internal/testenv.Vars", name, path)
		}
	}
}
