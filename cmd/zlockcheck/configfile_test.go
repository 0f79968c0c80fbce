package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/harness/suite"
	"github.com/zlockcheck/zlockcheck/models"
)

func runFlags() (*flag.FlagSet, *runOptions) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o runOptions
	o.register(fs)
	return fs, &o
}

func TestRunFileErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "recipe: gozk\nnemsis: kill\n", `:2: field "nemsis": unknown`},
		{"bad duration", "recipe: gozk\ntime: soon\n", `:2: field "time": time: invalid duration "soon"`},
		{"bad int", "workers: five\n", `:1: field "workers": `},
		{"bad bool", "fenced: maybe\n", `:1: field "fenced": `},
		{"list outside suite", "recipe: [gozk, zlc-mutex]\n", `:1: field "recipe": want a single value`},
		{"twice", "seed: 1\nseed: 2\n", `:2: field "seed": given twice (first on line 1)`},
		{"suite not a mapping", "suite: gozk\n", `:1: field "suite": want a mapping`},
		{"suite unknown list", "suite:\n  recipe: [gozk]\n", `:2: field "suite.recipe": unknown`},
		{"unknown recipe", "time: 5s\nrecipe: curator\n", `:2: field "recipe": unknown recipe "curator"`},
		{"suite unknown recipe", "suite:\n  recipes:\n    - gozk\n    - kazoo\n", `:4: field "suite.recipes": unknown recipe "kazoo" (want exec or one of curator-5.9-mutex`},
		{"suite bad seed", "suite:\n  seeds: [1, x]\n", `:2: field "suite.seeds": want non-zero integers, got "x"`},
		{"not a mapping", "- recipe\n", `:1: want a mapping`},
		{"yaml syntax", "recipe: [gozk\n", `yaml: line`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "nightly.yaml", c.yaml)
			fs, _ := runFlags()
			_, err := loadRunFile(path, fs)
			if err == nil {
				t.Fatalf("no error for %q", c.yaml)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to name %s and contain %q", err, path, c.want)
			}
		})
	}
}

func TestRunFileSetsFlagsAndTheCommandLineWins(t *testing.T) {
	path := writeFile(t, "nightly.yaml", "# nightly\nrecipe: zlc-mutex\nnemesis: kill,pause\ntime: 45s\nseed: 7\nfenced: true\nworkers: 3\n")
	fs, o := runFlags()
	if err := fs.Parse([]string{"--seed", "9"}); err != nil {
		t.Fatal(err)
	}
	rf, err := loadRunFile(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := rf.apply(fs, map[string]bool{"seed": true}); err != nil {
		t.Fatal(err)
	}
	if o.recipe != "zlc-mutex" || o.nemesis != "kill,pause" || o.cfg.Duration.String() != "45s" || !o.fenced || o.cfg.Workers != 3 {
		t.Errorf("options after the file: %+v", *o)
	}
	if o.cfg.Seed != 9 {
		t.Errorf("seed %d, want 9 (the command line wins)", o.cfg.Seed)
	}
	if rf.suite != nil {
		t.Error("a file without a suite section made a suite")
	}
}

func TestSuiteRunsAreTheProduct(t *testing.T) {
	path := writeFile(t, "suite.yaml", "time: 20s\nsuite:\n  recipes: [gozk, kazoo-lock]\n  nemesis: [none, \"kill,pause,partition\"]\n  seeds: [1, 2, 3]\n")
	fs, _ := runFlags()
	rf, err := loadRunFile(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	runs := rf.suite.Runs()
	if len(runs) != 12 {
		t.Fatalf("%d runs, want 2 x 2 x 3 = 12", len(runs))
	}
	if want := (suite.Run{Recipe: "kazoo-lock", Nemesis: "kill,pause,partition", Seed: 3}); !reflect.DeepEqual(runs[11], want) {
		t.Errorf("last run %+v, want %+v", runs[11], want)
	}
	if got := (suite.Spec{}).Runs(); len(got) != 1 {
		t.Errorf("an empty suite has %d runs, want 1 (the common flags alone)", len(got))
	}
}

// TestVerdictCodes: the exit code of each verdict, the worst of a suite's, a
// matrix's or explore's runs among them (models.Worse orders them).
func TestVerdictCodes(t *testing.T) {
	for v, want := range map[models.Verdict]int{models.Valid: exitValid, models.Invalid: exitInvalid, models.Unknown: exitUnknown, models.Error: exitError} {
		if got := verdictCode(v); got != want {
			t.Errorf("verdictCode(%s) = %d, want %d", v, got, want)
		}
	}
}

// The shipped examples load: explore's nightly job over 4 recipes and a single run.
func TestExampleRunFilesLoad(t *testing.T) {
	efs, _, e, _ := exploreFlags(io.Discard)
	rf, err := loadRunFile("../../examples/nightly.yaml", efs)
	if err != nil {
		t.Fatal(err)
	}
	if err := rf.apply(efs, nil); err != nil {
		t.Fatal(err)
	}
	if rf.suite == nil || len(rf.suite.Runs()) != 4 || len(rf.suite.Nemesis) != 0 || e.budget != 10*time.Minute {
		t.Errorf("nightly.yaml: suite %+v, budget %s; want 4 recipes, no nemesis, 10m", rf.suite, e.budget)
	}
	fs, o := runFlags()
	rf, err = loadRunFile("../../examples/single.yaml", fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := rf.apply(fs, nil); err != nil {
		t.Fatal(err)
	}
	if rf.suite != nil || o.recipe != "curator-mutex" || !o.fenced {
		t.Errorf("single.yaml: suite %v, recipe %q, fenced %v", rf.suite, o.recipe, o.fenced)
	}
}

// FuzzLoadRunFile: any file content gives a run file or an error naming the file,
// never a panic.
func FuzzLoadRunFile(f *testing.F) {
	for _, seed := range []string{
		"recipe: gozk\ntime: 30s\n",
		"suite:\n  recipes: [gozk]\n  seeds: [1, 2]\n",
		"seed: 1\nseed: 2\n",
		"- a\n",
		"time: [1\n",
		"",
		"suite: {recipes: [a, b], nemesis: [\"kill,pause\"], seeds: [3]}\nkeep: failed\n",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "run.yaml")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		fs, _ := runFlags()
		rf, err := loadRunFile(path, fs)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := rf.apply(fs, nil); err != nil {
			t.Fatalf("a file that loaded does not apply: %v", err)
		}
		if rf.suite != nil {
			_ = rf.suite.Runs()
		}
	})
}
