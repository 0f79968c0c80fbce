package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// kindFlags are the flags each kind of service adds for its own settings
// (lockservice.SettingsSpec.Flags): which flags are whose, and what they say once
// parsed. No flag here is named by this file: a new kind brings its own.
type kindFlags []kindFlagSet

// kindFlagSet is one kind's flags.
type kindFlagSet struct {
	spec lockservice.SettingsSpec
	// get reads the settings once the flags are parsed.
	get func() (lockservice.Settings, error)
	// names are the flags, as fs knows them.
	names []string
}

// register defines every kind's flags on fs.
func (k *kindFlags) register(fs *flag.FlagSet) {
	for _, spec := range lockservice.AllSettings() {
		if spec.Flags == nil {
			continue
		}
		own := flag.NewFlagSet(spec.Title, flag.ContinueOnError)
		set := kindFlagSet{spec: spec, get: spec.Flags(own)}
		own.VisitAll(func(f *flag.Flag) {
			fs.Var(f.Value, f.Name, f.Usage)
			set.names = append(set.names, f.Name)
		})
		*k = append(*k, set)
	}
}

// given are the settings of every kind whose flags were given (set: the flags
// given, runOptions.noteSet), for a matrix whose rows take the one of their kind.
func (k kindFlags) given(set map[string]bool) ([]lockservice.Settings, error) {
	var out []lockservice.Settings
	for _, s := range k {
		if len(s.givenOf(set)) == 0 {
			continue
		}
		v, err := s.get()
		if err != nil {
			return nil, usageError{err.Error()}
		}
		out = append(out, v)
	}
	return out, nil
}

// forKind is the settings of a run of kind n from the flags (nil when the kind has
// none); a flag of another kind's settings is refused, naming it.
func (k kindFlags) forKind(n kind.Name, set map[string]bool) (lockservice.Settings, error) {
	n = kind.Of(n).Name
	var mine lockservice.Settings
	for _, s := range k {
		given := s.givenOf(set)
		if slices.Contains(s.spec.Kinds, n) {
			v, err := s.get()
			if err != nil {
				return nil, usageError{err.Error()}
			}
			mine = v
			continue
		}
		if len(given) > 0 {
			return nil, usageError{fmt.Sprintf("--%s: %s for the %s service: add --service %s",
				strings.Join(given, ", --"), s.spec.Title, n.Title(), serviceChoices(s.spec.Kinds))}
		}
	}
	return mine, nil
}

// givenOf lists the set's flags that were given.
func (s kindFlagSet) givenOf(set map[string]bool) []string {
	var out []string
	for _, n := range s.names {
		if set[n] {
			out = append(out, n)
		}
	}
	return out
}

// serviceChoices names kinds as --service takes them: "redis", "postgres or mariadb".
func serviceChoices(ns []kind.Name) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
