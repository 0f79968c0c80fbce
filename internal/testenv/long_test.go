package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLongTestsAreListed: every top-level test that calls Long is named where a make
// target runs it with ZLC_LONG=1: the Makefile's LONG_TESTS (make test-long) or a
// target's own -run (make mutants). A long test named nowhere would run nowhere.
func TestLongTestsAreListed(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^LONG_TESTS := (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no LONG_TESTS := line")
	}
	listed := strings.Split(string(m[1]), "|")
	// The commands (continuation lines joined) that set ZLC_LONG=1 and name their tests.
	var runs []string
	for _, cmd := range strings.Split(strings.ReplaceAll(string(mk), "\\\n", " "), "\n") {
		if strings.Contains(cmd, LongVar+"=1") && !strings.Contains(cmd, "$(LONG_TESTS)") {
			runs = append(runs, cmd)
		}
	}
	callers := longCallers(t)
	if len(callers) == 0 {
		t.Fatal("found no test that calls testenv.Long: the walk is broken")
	}
	for name, file := range callers {
		named := slices.Contains(listed, name) || slices.ContainsFunc(runs, func(cmd string) bool {
			return regexp.MustCompile(`\b` + name + `\b`).MatchString(cmd)
		})
		if !named {
			t.Errorf("%s: %s calls testenv.Long but no make target runs it with %s=1 (add it to the Makefile's LONG_TESTS): it would never run", file, name, LongVar)
		}
	}
}

// longCallers maps each top-level test of the checkout whose body calls
// testenv.Long (directly, or in a closure it holds) to its file.
func longCallers(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "store" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if ok && sel.Sel.Name == "Long" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testenv" {
						out[fn.Name.Name], _ = filepath.Rel(root, path)
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
