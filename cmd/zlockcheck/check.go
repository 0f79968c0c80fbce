package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/report"
)

// checkCmd is `zlockcheck check`: a history file checked with the flags' model, or a
// run directory checked again as the run is judged.
func checkCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("check", stderr)
	var (
		model   = fs.String("model", "mutex", "model of the lock keys: mutex, semaphore, rwlock, reentrant, knossos-mutex (read/write keys are checked as registers)")
		permits = fs.Int("permits", 1, "semaphore permits")
		format  = fs.String("format", "", "history format: jsonl or edn (default: from the file name)")
		timeout = fs.Duration("check-timeout", models.DefaultTimeout, "budget of the linearizability search; past it the verdict is unknown")
		html    = fs.String("html", "", "write porcupine's visualization of any violation to this file")
		parse   = fs.Bool("parse-only", false, "only load and validate the file (exit 0 when it loads); for benchmarks")
		jsonOut = fs.Bool("json", false, "with a run directory: print results.json on stdout (the summary goes to stderr)")
	)
	deprecatedAlias(fs, "timeout", "check-timeout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zlockcheck check [flags] FILE|RUN_DIR\n\nA run directory is re-checked with its own model and its report files rewritten.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return exitError, err
	}
	if fs.NArg() != 1 {
		return exitError, usageError{"check takes exactly one history file"}
	}
	path := fs.Arg(0)
	set := given(fs)
	flags := modelFlags{model: *model, permits: *permits, timeout: *timeout, timeoutSet: set["check-timeout"] || set["timeout"]}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return checkRunDir(path, flags, *jsonOut, stdout, stderr)
	}
	cfg, err := flags.flagsConfig()
	if err != nil {
		return exitError, err
	}
	h, err := loadHistory(path, *format, stderr)
	if err != nil {
		return exitError, err
	}
	if *parse {
		fmt.Fprintf(stdout, "%s: %d ops loaded\n", path, len(h))
		return 0, nil
	}
	res, err := models.Check(h, cfg)
	if err != nil {
		return exitError, fmt.Errorf("%s: %w", path, err)
	}
	verdict, err := report.PrintCheck(stdout, path, h, res, cfg)
	if err != nil {
		return exitError, err
	}
	if *html != "" && res.Verdict == models.Invalid {
		f, err := os.Create(*html)
		if err != nil {
			return exitError, err
		}
		defer f.Close()
		if err := models.WriteVisualization(f, res, cfg); err != nil {
			return exitError, err
		}
		fmt.Fprintf(stdout, "visualization: %s\n", *html)
	}
	return verdictCode(verdict), nil
}

// loadHistory loads a history file in format (jsonl or edn; "": by the file's name),
// its warnings on stderr.
func loadHistory(path, format string, stderr io.Writer) (histories.History, error) {
	if format == "" {
		format = "jsonl"
		if strings.EqualFold(filepath.Ext(path), ".edn") {
			format = "edn"
		}
	}
	switch format {
	case "jsonl":
		h, warnings, err := histories.Load(path)
		for _, w := range warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		return h, err
	case "edn":
		return histories.LoadEDN(path)
	}
	return nil, fmt.Errorf("--format: want jsonl or edn, got %q", format)
}
