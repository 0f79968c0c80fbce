package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/zlockcheck/zlockcheck/recipes"
)

// execDoc describes --recipe exec, which is the harness's, not a catalogue entry.
const execDoc = "your own worker: " + execCmd + " speaking protocol v1, v2 or v3"

// execCmd is the flag execDoc names (set as code in the Markdown table).
const execCmd = `--worker-cmd "CMD ARGS"`

func recipesCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("recipes", stderr)
	all := fs.Bool("allow-mutants", false, "also list the deliberately broken mutants")
	markdown := fs.Bool("markdown", false, "print the list as the README's Markdown table")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if *markdown {
		fmt.Fprint(stdout, recipesMarkdown(*all))
		return 0, nil
	}
	for _, r := range recipes.Catalog() {
		if r.Mutant && !*all {
			continue
		}
		fmt.Fprintf(stdout, "%-28s %-26s %s\n", r.Name, kindList(r, ","), r.Doc)
	}
	fmt.Fprintf(stdout, "%-28s %-26s %s\n", "exec", "any", execDoc)
	return 0, nil
}

// recipesMarkdown renders the catalogue as the README's recipes table.
func recipesMarkdown(mutants bool) string {
	var b strings.Builder
	b.WriteString("| recipe | workloads | runs on | what it is |\n|---|---|---|---|\n")
	for _, r := range recipes.Catalog() {
		if r.Mutant && !mutants {
			continue
		}
		on := "the zlockcheck binary"
		if pkgs := r.Packages(); len(pkgs) > 0 {
			on = "`" + strings.Join(pkgs, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Name, kindList(r, ", "), on, r.Doc)
	}
	fmt.Fprintf(&b, "| `exec` | any | whatever your worker needs | %s |\n", strings.Replace(execDoc, execCmd, "`"+execCmd+"`", 1))
	return b.String()
}

func kindList(r recipes.Entry, sep string) string {
	var kinds []string
	for _, k := range r.Kinds {
		kinds = append(kinds, string(k))
	}
	return strings.Join(kinds, sep)
}
