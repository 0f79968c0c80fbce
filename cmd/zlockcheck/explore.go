package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/harness/explore"
	"github.com/zlockcheck/zlockcheck/harness/suite"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/rundir"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// exploreChooses are run's flags that explore does not take: it chooses the faults,
// their targets, the workload's regimes and each round's length itself.
func exploreChooses() []string {
	return []string{"nemesis", "nemesis-targets", "partition-shapes", "vary", "regime-length",
		"keep-workers", "time", "baseline", "baseline-processes", "baseline-warmup", "cpuprofile", "worker-cpuprofile", "nemesis-interval", "client-hold"}
}

// exploreCmd is `zlockcheck explore`: rounds of runs within a time budget, each
// choosing its regime and faults by what the earlier rounds left unexercised. With
// -f, a run file's suite explores each recipe (and seed) in turn, a budget each.
func exploreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, o, e, file := exploreFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	sessions := []suite.Run{{}}
	spec, err := applyRunFile(fs, *file)
	if err != nil {
		return exitError, err
	}
	if spec != nil {
		if len(spec.Nemesis) > 0 {
			return exitError, fmt.Errorf("%s: suite: field \"nemesis\": explore chooses the faults itself; list recipes and seeds", *file)
		}
		sessions = spec.Runs()
	}
	keep, err := harness.ParseKeep(o.keep)
	if err != nil {
		return exitError, fmt.Errorf("--keep: %w", err)
	}
	if err := e.check(); err != nil {
		return exitError, err
	}
	o.noteSet(fs)
	if err := o.sweep(ctx, stderr); err != nil {
		return exitError, err
	}
	worst := models.Valid
	var sessions2 []explore.Session
	for i, sr := range sessions {
		if ctx.Err() != nil {
			break
		}
		if sr.Recipe != "" {
			o.recipe = sr.Recipe
		}
		if sr.Seed != 0 {
			o.cfg.Seed = sr.Seed
		}
		if len(sessions) > 1 {
			fmt.Fprintf(stderr, "[%d/%d] explore %s\n", i+1, len(sessions), o.recipe)
		}
		session, err := exploreOne(ctx, *o, *e, keep, stdout, stderr)
		sessions2 = append(sessions2, session)
		verdict := session.Verdict
		if err != nil {
			fmt.Fprintf(stderr, "zlockcheck explore: %s: %v\n", o.recipe, err)
			verdict = models.Error
		}
		worst = models.Worse(worst, verdict)
	}
	if o.jsonOut {
		if err := writeSessionsJSON(stdout, sessions2); err != nil {
			return exitError, err
		}
	}
	return verdictCode(worst), nil
}

// writeSessionsJSON prints the sessions as indented JSON: one session alone, many as
// a list.
func writeSessionsJSON(w io.Writer, sessions []explore.Session) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	var v any = sessions
	if len(sessions) == 1 {
		v = sessions[0]
	}
	return enc.Encode(v)
}

// exploreFlags defines explore's flags: run's, less those explore chooses itself,
// and its own; file is -f's value.
func exploreFlags(stderr io.Writer) (fs *flag.FlagSet, o *runOptions, e *exploreOptions, file *string) {
	fs = newFlagSet("explore", stderr)
	o, e = &runOptions{}, &exploreOptions{}
	all := flag.NewFlagSet("run", flag.ContinueOnError)
	o.register(all)
	all.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(exploreChooses(), f.Name) {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	fs.DurationVar(&e.budget, "budget", 10*time.Minute, "each session's time: no round starts once it is spent")
	fs.DurationVar(&e.round, "round", explore.DefaultRound, "each round's workload time")
	fs.DurationVar(&e.firstRound, "first-round", 0, "the workload time of the first pass's rounds, one per probe (a probe's own first look when longer, never longer than --round); 0: the service's menu's, 8 s)")
	fs.BoolVar(&e.keepGoing, "keep-going", false, "go on after a round found a violation, to the end of the budget")
	fs.IntVar(&e.lanes, "lanes", 0, "how many rounds run at once, each on an ensemble of its own (0: the service's menu's: 4 on Redis, 3 on the databases, 1 on ZooKeeper and etcd, and 1 with --connect or --ssh-nodes)")
	file = fs.String("f", "", "read the flags from this YAML file (keys: explore's flags; a suite section lists recipes and seeds, one session each); the command line wins")
	return fs, o, e, file
}

// exploreOptions are explore's own flags.
type exploreOptions struct {
	budget, round, firstRound time.Duration
	keepGoing                 bool
	lanes                     int
}

// check refuses durations no session can use, naming the flag.
func (e exploreOptions) check() error {
	switch {
	case e.budget <= 0:
		return usageError{fmt.Sprintf("--budget %s: want a budget > 0", e.budget)}
	case e.round <= 0:
		return usageError{fmt.Sprintf("--round %s: want a round > 0", e.round)}
	case e.firstRound < 0:
		return usageError{fmt.Sprintf("--first-round %s: want 0 (the service's) or more", e.firstRound)}
	case e.lanes < 0:
		return usageError{fmt.Sprintf("--lanes %d: want 0 (the service's) or more", e.lanes)}
	}
	return nil
}

// exploreOne is one session: o's recipe explored for the budget (explore.Run), its
// rounds printed.
func exploreOne(ctx context.Context, o runOptions, e exploreOptions, keep harness.Keep, stdout, stderr io.Writer) (explore.Session, error) {
	o.nemesis = "none"
	o.vary = false
	base, err := o.config(stderr)
	if err != nil {
		return explore.Session{}, err
	}
	if !o.set["session-timeout"] {
		base.SessionTimeout = 0 // explore's own choice (explore.Config.Base)
	}
	base.Keep = keep
	var logw io.Writer
	if !o.quiet {
		logw = stderr
	}
	session, err := explore.Run(ctx, explore.Config{
		Base: base, Budget: e.budget, Round: e.round, FirstRound: e.firstRound, KeepGoing: e.keepGoing, Lanes: e.lanes, Log: logw, Warn: stderr,
		Fixed: o.fixed(),
	})
	if session.Dir == "" {
		return session, err
	}
	out := stdout
	if o.jsonOut {
		out = stderr
	}
	printSession(out, base.Recipe, session)
	fmt.Fprintf(out, "session: %s\n", filepath.Join(session.Dir, rundir.Session))
	return session, err
}

// fixed are the workload knobs given by hand, which every regime keeps fixed.
func (o runOptions) fixed() workloads.Fixed {
	var f workloads.Fixed
	if o.set["acquire-timeout"] {
		f.AcquireTimeout = o.acquireTO
	}
	if o.set["hold-max"] {
		f.HoldMax = o.holdMax
	}
	if o.set["think-max"] {
		f.ThinkMax = o.thinkMax
	}
	return f
}

// printSession prints a line per round and what the whole session exercised.
func printSession(w io.Writer, recipe string, s explore.Session) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	lanes := s.Lanes > 1
	head := "round\tprobe\tseed\tverdict\ttime\trun"
	if lanes {
		head = "round\tlane\tprobe\tseed\tverdict\ttime\tended\trun"
	}
	fmt.Fprintln(tw, head)
	for i, r := range s.Rounds {
		verdict := string(r.Verdict)
		if r.Cause != "" {
			verdict += " (" + r.Cause + ")"
		}
		if lanes {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", i+1, r.Lane, r.Probe, r.Seed, verdict, r.Elapsed.Round(time.Second), r.EndedAt.Round(time.Second), r.Dir)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", i+1, r.Probe, r.Seed, verdict, r.Elapsed.Round(time.Second), r.Dir)
	}
	tw.Flush()
	if s.Tally.Coverage.Exercised {
		fmt.Fprintln(w, "\nexercised over the session:")
		if err := coverage.WriteText(w, s.Tally.Coverage); err != nil {
			fmt.Fprintf(w, "  (coverage: %v)\n", err)
		}
	}
	note := ""
	if s.Verdict == models.Valid && s.Tally.Coverage.VerdictNote() != "" {
		note = " " + s.Tally.Coverage.VerdictNote()
	}
	where := ""
	if lanes {
		where = fmt.Sprintf(" on %d lanes", s.Lanes)
	}
	found := ""
	if s.Detected > 0 {
		found = fmt.Sprintf(" (found at %s)", s.Detected.Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "\nexplore %s: %d rounds%s in %s%s: %s%s%s\n", recipe, len(s.Rounds), where, s.Elapsed.Round(time.Second), found, strings.ToUpper(string(s.Verdict)), note, honestOnly(s))
}

// honestOnly says, for an invalid session whose every invalid round was honest (the
// truth about the service, cause.Class.Honest), which causes they were.
func honestOnly(s explore.Session) string {
	var causes []string
	for _, r := range s.Rounds {
		if r.Verdict != models.Invalid {
			continue
		}
		if !r.Honest {
			return ""
		}
		if !slices.Contains(causes, r.Cause) {
			causes = append(causes, r.Cause)
		}
	}
	if len(causes) == 0 {
		return ""
	}
	return " by honest causes only (" + strings.Join(causes, ", ") + "): no recipe bug found"
}
