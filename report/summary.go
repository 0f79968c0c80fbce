package report

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
)

// Summary prints a run's outcome for a person, the reason first: the verdict and,
// for each check that is not valid, its cause class (with what would close the
// window, if known) and its witness; then what ran (test, seed, ops, versions), the
// ops by type, the coverage table, the herd line and the run's files.
func Summary(w io.Writer, r Results) {
	fmt.Fprintln(w)
	printVerdict(w, r.Verdict, r.Checks, r.Coverage)
	fmt.Fprintf(w, "%s  seed %d  %d ops by %d processes in %.1fs", r.Test, r.Seed, r.Ops, r.Processes, r.ElapsedSeconds)
	if r.Interrupted {
		fmt.Fprint(w, "  (interrupted)")
	}
	fmt.Fprintln(w)
	var versions []string
	if v := ServerLabel(r.Server()); v != "" {
		versions = append(versions, v)
	}
	if r.RecipeVersion != "" {
		versions = append(versions, r.RecipeVersion)
	}
	if len(versions) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(versions, ", "))
	}
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "  %.1f lock cycles per second\n", r.CyclesPerSecond)
	_ = coverage.WriteText(w, r.Coverage)
	if r.Herd != nil {
		fmt.Fprintf(w, "%s\n  %s\n", r.Herd.Line, r.Herd.Figures())
	}
	fmt.Fprintf(w, "run:      %s\n", r.Dir)
	names := make([]string, 0, len(r.Files))
	for k := range r.Files {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "  %-16s %s\n", k+":", filepath.Join(r.Dir, r.Files[k]))
	}
}

// Reasons are the checks that make a run other than valid, in the order a person
// should read them: the checks that decide the verdict first, then the advisory ones
// (see Verdict), each group in the order of checks. A valid check is no reason.
func Reasons(checks []Check) []Check {
	var deciding, advisory []Check
	for _, c := range checks {
		switch {
		case c.Verdict == models.Valid:
		case c.Advisory:
			advisory = append(advisory, c)
		default:
			deciding = append(deciding, c)
		}
	}
	return append(deciding, advisory...)
}

// KeyName is how a check's key is shown: the key, or "(the lock)" for a history
// whose ops name none.
func KeyName(key string) string {
	if key == "" {
		return "(the lock)"
	}
	return key
}

// serviceName is the service as results.json records it: the default kind's name
// for none (a run made before there was another).
func serviceName(s string) string { return string(kind.Of(kind.Name(s)).Name) }

// Server returns the lock service these results were made with and its servers'
// version as shown (DisplayVersion). An older results.json, with only
// zookeeper_version, is ZooKeeper's.
func (r Results) Server() (service, version string) {
	version = r.ServerVersion
	if version == "" {
		version = r.ZooKeeperVersion
	}
	return serviceName(r.Service), DisplayVersion(version)
}

// ServiceTitle is how a person reads a service's name: "ZooKeeper", "Redis",
// "PostgreSQL", "MariaDB" (kind.Kind.Title); a name the tool does not know as it is.
func ServiceTitle(service string) string { return kind.Name(service).Title() }

// ServerLabel is the service and its version as the summary shows them, "Redis
// 7.0.15" or "ZooKeeper 3.8.0" (the version through DisplayVersion); "" when the
// version is not known.
func ServerLabel(service, version string) string {
	v := DisplayVersion(version)
	if v == "" {
		return ""
	}
	return ServiceTitle(service) + " " + v
}

// mavenPlaceholder is a Maven property left unexpanded in a version string, with
// the separator before it: Debian builds ZooKeeper without its git properties, so
// its servers report "3.8.0-${mvngit.commit.id}".
var mavenPlaceholder = regexp.MustCompile(`[-+.]?\$\{[^{}]*\}`)

// DisplayVersion is a version string as the report shows it: every unexpanded
// Maven placeholder (`-${...}`) is dropped, and with it a suffix it leaves empty
// ("3.8.0-${mvngit.commit.id}" is "3.8.0"; "3.8.0-" is "3.8.0"). A real suffix stays:
// "3.8.0-SNAPSHOT" and "3.8.4-9316c2a" say something about the build. Words after
// the version stay too ("3.8.0-${mvngit.commit.id} (existing ensemble)" is "3.8.0
// (existing ensemble)"). It is idempotent: a version already clean is returned as it
// is (but for surrounding space), so it may be applied to one cleaned at the source.
func DisplayVersion(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	version, rest, _ := strings.Cut(v, " ")
	version = mavenPlaceholder.ReplaceAllString(version, "")
	version = strings.TrimRight(version, "-+.")
	return strings.TrimSpace(version + " " + strings.TrimSpace(rest))
}

func printCounts(w io.Writer, counts map[string]map[string]int) {
	fs := make([]string, 0, len(counts))
	for f := range counts {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	for _, f := range fs {
		c := counts[f]
		fmt.Fprintf(w, "  %-8s invoke %-6d ok %-6d fail %-6d info %d\n", f, c["invoke"], c["ok"], c["fail"], c["info"])
	}
}

// printVerdict prints the verdict line (a valid one says how many of cov's
// situations were not exercised, coverage.Table.VerdictNote) and each reason (see
// Reasons): its key, verdict and checker and when it first broke, its cause class
// and why, what would close the window, and its witness.
func printVerdict(w io.Writer, v models.Verdict, checks []Check, cov coverage.Table) {
	line := "verdict:  " + strings.ToUpper(string(v))
	if note := cov.VerdictNote(); v == models.Valid && note != "" {
		line += " " + note
	}
	fmt.Fprintln(w, line)
	for _, c := range Reasons(checks) {
		note := ""
		if c.Advisory {
			note = ", advisory: the data the lock protects decides the verdict"
		}
		first := ""
		if c.FirstViolationSeconds != nil {
			first = fmt.Sprintf(", first at %.3fs", *c.FirstViolationSeconds)
		}
		fmt.Fprintf(w, "  key %s: %s (%s checker%s)%s\n", KeyName(c.Key), c.Verdict, c.Checker, note, first)
		if c.Cause != nil {
			fmt.Fprintf(w, "    cause: %s: %s\n", strings.ToUpper(string(c.Cause.Class)), c.Cause.Why)
			if c.Cause.Fix != "" {
				fmt.Fprintf(w, "    to close the window: %s\n", c.Cause.Fix)
			}
		}
		if witness := strings.TrimRight(c.Witness, "\n"); witness != "" {
			for _, line := range strings.Split(witness, "\n") {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
}
