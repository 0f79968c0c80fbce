package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zlockcheck/zlockcheck/explore"
	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/rundir"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// exploreChooses are run's flags that explore does not take: it chooses the faults,
// their targets, the workload's regimes and each round's length itself.
func exploreChooses() []string {
	return []string{"nemesis", "nemesis-targets", "partition-shapes", "vary", "regime-length",
		"keep-workers", "time", "baseline", "cpuprofile", "worker-cpuprofile", "nemesis-interval"}
}

// exploreCmd is `zlockcheck explore`: rounds of runs within a time budget, each
// choosing its regime and faults by what the earlier rounds left unexercised.
func exploreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("explore", stderr)
	var o runOptions
	all := flag.NewFlagSet("run", flag.ContinueOnError)
	o.register(all)
	all.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(exploreChooses(), f.Name) {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	budget := fs.Duration("budget", 10*time.Minute, "the session's time: no round starts once it is spent")
	round := fs.Duration("round", explore.DefaultRound, "each round's workload time")
	keepGoing := fs.Bool("keep-going", false, "go on after a round found a violation, to the end of the budget")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if fs.NArg() > 0 {
		return exitError, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	keep, err := parseKeep(o.keep)
	if err != nil {
		return exitError, fmt.Errorf("--keep: %w", err)
	}
	o.noteSet(fs)
	o.nemesis = "none"
	base, modelCfg, err := o.plan(ctx, stderr)
	if err != nil {
		return exitError, err
	}
	base.StallAfter = o.cfg.StallAfter // derived from each round's faults, not the base's
	logw := stderr
	if o.quiet {
		logw = nil
	}
	session, err := explore.Run(ctx, explore.Config{
		Base: base, Budget: *budget, Round: *round, KeepGoing: *keepGoing, Log: logw,
		Fixed:    o.fixed(),
		RunRound: roundRunner(modelCfg, keep, stderr),
	})
	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(session); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		printSession(stdout, session)
	}
	if err != nil {
		return exitError, err
	}
	return verdictCode(session.Verdict), nil
}

// roundRunner runs and checks one round as `run` does, keeping its directory by keep.
func roundRunner(modelCfg models.Config, keep keepPolicy, stderr io.Writer) func(context.Context, harness.Config) (explore.Round, error) {
	return func(ctx context.Context, cfg harness.Config) (explore.Round, error) {
		cfg.Log = io.Discard
		res, err := execute(ctx, cfg, modelCfg, stderr)
		if err != nil && res.Dir == "" {
			return explore.Round{}, err
		}
		r := explore.Round{Dir: res.Dir, Verdict: res.Verdict}
		for _, c := range res.Checks {
			if c.Cause != nil && r.Cause == "" {
				r.Cause = string(c.Cause.Class)
			}
		}
		if err != nil {
			r.Verdict = models.Unknown
		}
		if keep == keepFailed && res.Verdict == models.Valid {
			if err := rundir.Remove(cfg.Store, cfg.Name, rundir.Dir(res.Dir)); err != nil {
				return r, err
			}
			r.Dir = "(removed: --keep failed)"
		}
		return r, nil
	}
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
func printSession(w io.Writer, s explore.Session) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "round\tprobe\tseed\tverdict\ttime\trun")
	for i, r := range s.Rounds {
		verdict := string(r.Verdict)
		if r.Cause != "" {
			verdict += " (" + r.Cause + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", i+1, r.Probe, r.Seed, verdict, r.Elapsed.Round(time.Second), r.Dir)
	}
	tw.Flush()
	if len(s.Tally.Situations) > 0 {
		fmt.Fprintln(w, "\nexercised over the session:")
		names := make([]string, 0, len(s.Tally.Situations))
		for name := range s.Tally.Situations {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(w, "  %6d  %s\n", s.Tally.Situations[name], name)
		}
	}
	fmt.Fprintf(w, "\nexplore: %d rounds in %s: %s\n", len(s.Rounds), s.Elapsed.Round(time.Second), strings.ToUpper(string(s.Verdict)))
}
