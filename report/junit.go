package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
)

// JUnitSuites is the root of junit.xml: one suite, the run.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     float64      `xml:"time,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is the run: its checks are the test cases.
type JUnitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       float64         `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []JUnitProperty `xml:"properties>property"`
	Cases      []JUnitCase     `xml:"testcase"`
}

// JUnitProperty is one name=value of the suite: recipe, seed, model, verdict, ...
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one check (a key, the liveness check, or the run itself when it broke).
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *JUnitProblem `xml:"failure,omitempty"`
	Error     *JUnitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitProblem is a failure (the check found a violation) or an error (the check
// could not decide, or the run broke down); Message is the witness.
type JUnitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// JUnit turns a run's results into a JUnit report. The suite is named after the test
// (or the recipe when the test has no name). Each check is a test case: an invalid
// check fails with its witness as the message, an unknown one is an error, and an
// advisory one (see Verdict) passes with its witness on system-out. A run that broke
// down (SetupError) adds an erring case "run". The suite's time is the time the
// checks took; the keys are checked in one pass, so a case's time is that time shared
// out by the case's ops.
func JUnit(r Results, at time.Time) JUnitSuites {
	name := r.Test
	if name == "" {
		name = r.Recipe
	}
	if name == "" {
		name = "zlockcheck"
	}
	class := "zlockcheck." + name
	s := JUnitSuite{Name: name, Time: r.CheckSeconds, Timestamp: at.UTC().Format("2006-01-02T15:04:05")}
	prop := func(k, v string) {
		if v != "" {
			s.Properties = append(s.Properties, JUnitProperty{Name: k, Value: v})
		}
	}
	prop("recipe", r.Recipe)
	prop("test", r.Test)
	prop("run_id", r.RunID)
	prop("seed", fmt.Sprint(r.Seed))
	prop("model", string(r.Model))
	prop("verdict", string(r.Verdict))
	prop("ops", fmt.Sprint(r.Ops))
	prop("processes", fmt.Sprint(r.Processes))
	prop("run_seconds", fmt.Sprintf("%.3f", r.ElapsedSeconds))
	service, version := r.Server()
	prop("service", service)
	prop("server_version", version)
	if kind.Name(service) == kind.ZooKeeper { // as results.json's zookeeper_version
		prop("zookeeper_version", version)
	}
	prop("tool_version", r.ToolVersion)
	if r.Interrupted {
		prop("interrupted", "true")
	}
	if r.Herd != nil {
		prop("herd", r.Herd.Line)
	}
	modelOps := 0
	for _, c := range r.Checks {
		if c.Key != LivenessKey {
			modelOps += c.Ops
		}
	}
	for _, c := range r.Checks {
		key := c.Key
		if key == "" {
			key = "(the lock)"
		}
		tc := JUnitCase{Name: fmt.Sprintf("%s [%s]", key, c.Checker), Classname: class}
		if c.Key != LivenessKey && modelOps > 0 {
			tc.Time = r.CheckSeconds * float64(c.Ops) / float64(modelOps)
		}
		switch {
		case c.Verdict == models.Valid:
		case c.Advisory:
			tc.SystemOut = fmt.Sprintf("advisory (%s): the data the lock protects decides the verdict\n%s", c.Verdict, c.Witness)
		case c.Verdict == models.Invalid:
			tc.Failure = &JUnitProblem{Message: witnessOr(c.Witness, "invalid"), Type: "invalid", Text: problemText(c)}
			if c.Cause != nil {
				tc.Failure.Type = "invalid: " + string(c.Cause.Class)
				tc.Failure.Message = string(c.Cause.Class) + ": " + tc.Failure.Message
			}
			s.Failures++
		default:
			tc.Error = &JUnitProblem{Message: witnessOr(c.Witness, string(c.Verdict)), Type: string(c.Verdict), Text: problemText(c)}
			s.Errors++
		}
		s.Cases = append(s.Cases, tc)
	}
	if r.SetupError != "" {
		s.Cases = append(s.Cases, JUnitCase{Name: "run", Classname: class,
			Error: &JUnitProblem{Message: r.SetupError, Type: "setup", Text: r.SetupError}})
		s.Errors++
	}
	s.Tests = len(s.Cases)
	return JUnitSuites{Name: "zlockcheck", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: s.Time, Suites: []JUnitSuite{s}}
}

func witnessOr(w, fallback string) string {
	if strings.TrimSpace(w) == "" {
		return fallback
	}
	return w
}

func problemText(c Check) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %q: %s (%s checker, %d ops)\n", c.Key, c.Verdict, c.Checker, c.Ops)
	if c.FirstViolationSeconds != nil {
		fmt.Fprintf(&b, "first violation at %.6fs\n", *c.FirstViolationSeconds)
	}
	if n := len(c.WindowIndexes); n > 0 {
		const most = 40
		if n > most {
			fmt.Fprintf(&b, "window: %d ops, the first %d at indexes %v\n", n, most, c.WindowIndexes[:most])
		} else {
			fmt.Fprintf(&b, "window: ops at indexes %v\n", c.WindowIndexes)
		}
	}
	if c.Cause != nil {
		fmt.Fprintf(&b, "cause: %s: %s\n", c.Cause.Class, c.Cause.Why)
	}
	b.WriteString(c.Witness)
	return b.String()
}

// WriteJUnit writes r as junit.xml (see JUnit); at is the report's timestamp.
func WriteJUnit(w io.Writer, r Results, at time.Time) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(JUnit(r, at)); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
