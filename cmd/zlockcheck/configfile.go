package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/zlockcheck/zlockcheck/harness/suite"
	"github.com/zlockcheck/zlockcheck/recipes"
)

// runFile is a run configuration read from a YAML file (`run -f FILE`): its keys are
// run's flag names, its values what the flag would be given. An optional `suite`
// section turns it into a test-all style suite: every recipe × nemesis × seed listed
// there is run with the other keys in common.
type runFile struct {
	// flags are the file's top-level keys as flag assignments, in file order.
	flags []fileFlag
	// suite is nil for a single run.
	suite *suite.Spec
}

// fileFlag is one top-level key of a run file with the line it is on.
type fileFlag struct {
	name, value string
	line        int
}

// applyRunFile sets fs's flags from the run file at path (none when path is empty);
// the flags given on the command line win. It returns the file's suite, if any.
func applyRunFile(fs *flag.FlagSet, path string) (*suite.Spec, error) {
	if path == "" {
		return nil, nil
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	rf, err := loadRunFile(path, fs)
	if err != nil {
		return nil, err
	}
	if err := rf.apply(fs, explicit); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rf.suite, nil
}

// loadRunFile reads and validates path against the flags of fs (without setting
// them): an unknown key, a value of the wrong kind or a malformed suite is an error
// naming the file, the line and the key.
func loadRunFile(path string, fs *flag.FlagSet) (runFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return runFile{}, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return runFile{}, fmt.Errorf("%s: %v", path, err)
	}
	var rf runFile
	if len(doc.Content) == 0 {
		return rf, fmt.Errorf("%s: empty file", path)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return rf, fmt.Errorf("%s:%d: want a mapping of flag names to values", path, root.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		name := key.Value
		if prev, dup := seen[name]; dup {
			return rf, fmt.Errorf("%s:%d: field %q: given twice (first on line %d)", path, key.Line, name, prev)
		}
		seen[name] = key.Line
		if name == "suite" {
			s, err := parseSuite(path, val)
			if err != nil {
				return rf, err
			}
			rf.suite = &s
			continue
		}
		if name == "f" || fs.Lookup(name) == nil {
			return rf, fmt.Errorf("%s:%d: field %q: unknown (the keys are run's flags, e.g. recipe, nemesis, time, seed; or suite)", path, key.Line, name)
		}
		if val.Kind != yaml.ScalarNode {
			return rf, fmt.Errorf("%s:%d: field %q: want a single value (a list goes in suite)", path, val.Line, name)
		}
		rf.flags = append(rf.flags, fileFlag{name: name, value: val.Value, line: val.Line})
	}
	for _, f := range rf.flags {
		if err := checkFlagValue(fs.Lookup(f.name), f.value); err != nil {
			return rf, fmt.Errorf("%s:%d: field %q: %v", path, f.line, f.name, err)
		}
		if f.name == "ssh-nodes" {
			if err := new(nodeList).Set(f.value); err != nil {
				return rf, fmt.Errorf("%s:%d: field %q: %v", path, f.line, f.name, err)
			}
		}
		if f.name == "recipe" {
			if err := checkRecipeName(f.value); err != nil {
				return rf, fmt.Errorf("%s:%d: field %q: %v", path, f.line, f.name, err)
			}
		}
	}
	return rf, nil
}

// checkFlagValue reports whether value parses as flag f's type, without setting f.
func checkFlagValue(f *flag.Flag, value string) error {
	getter, ok := f.Value.(flag.Getter)
	if !ok {
		return nil
	}
	switch getter.Get().(type) {
	case time.Duration:
		_, err := time.ParseDuration(value)
		return err
	case bool:
		_, err := strconv.ParseBool(value)
		return err
	case int, int64:
		_, err := strconv.ParseInt(value, 10, 64)
		return err
	case float64:
		_, err := strconv.ParseFloat(value, 64)
		return err
	}
	return nil
}

// parseSuite reads the suite section (suite.Spec), naming the file, line and field
// of what it refuses.
func parseSuite(path string, n *yaml.Node) (suite.Spec, error) {
	var s suite.Spec
	if n.Kind != yaml.MappingNode {
		return s, fmt.Errorf("%s:%d: field \"suite\": want a mapping with recipes, nemesis and seeds", path, n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if val.Kind != yaml.SequenceNode {
			return s, fmt.Errorf("%s:%d: field \"suite.%s\": want a list", path, val.Line, key.Value)
		}
		var items []string
		for _, it := range val.Content {
			if it.Kind != yaml.ScalarNode || strings.TrimSpace(it.Value) == "" {
				return s, fmt.Errorf("%s:%d: field \"suite.%s\": want non-empty single values", path, it.Line, key.Value)
			}
			items = append(items, it.Value)
		}
		switch key.Value {
		case "recipes":
			for j, it := range items {
				if err := checkRecipeName(it); err != nil {
					return s, fmt.Errorf("%s:%d: field \"suite.recipes\": %v", path, val.Content[j].Line, err)
				}
			}
			s.Recipes = items
		case "nemesis":
			s.Nemesis = items
		case "seeds":
			for j, it := range items {
				seed, err := strconv.ParseInt(it, 10, 64)
				if err != nil || seed == 0 {
					return s, fmt.Errorf("%s:%d: field \"suite.seeds\": want non-zero integers, got %q", path, val.Content[j].Line, it)
				}
				s.Seeds = append(s.Seeds, seed)
			}
		default:
			return s, fmt.Errorf("%s:%d: field \"suite.%s\": unknown (want recipes, nemesis, seeds)", path, key.Line, key.Value)
		}
	}
	return s, nil
}

// checkRecipeName reports whether name is exec or in the recipe catalogue.
func checkRecipeName(name string) error {
	if name == "exec" {
		return nil
	}
	_, err := recipes.Find(name)
	return err
}

// apply sets the file's flags on fs, except those given on the command line
// (explicit), which win over the file.
func (rf runFile) apply(fs *flag.FlagSet, explicit map[string]bool) error {
	for _, f := range rf.flags {
		if _, onCommandLine := explicit[f.name]; onCommandLine {
			continue
		}
		if err := fs.Set(f.name, f.value); err != nil {
			return fmt.Errorf("field %q: %v", f.name, err)
		}
	}
	return nil
}
