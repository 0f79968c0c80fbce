package lockservice_test

import (
	"context"
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
	_ "github.com/zlockcheck/zlockcheck/lockservice/builtin"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// TestEveryKindStarts: every kind of the catalogue has a way to start its servers
// once its package is linked, and a kind nobody registered is refused by name.
func TestEveryKindStarts(t *testing.T) {
	for _, k := range kind.All() {
		if !lockservice.Registered(k.Name) {
			t.Errorf("kind %s: no start registered (lockservice.RegisterStart)", k.Name)
		}
	}
	for _, f := range lockservice.Fetchers() {
		if _, ok := kind.Lookup(f.Kind); !ok || f.What == "" {
			t.Errorf("fetcher %+v: not a registered kind's, or says nothing of what it fetches", f)
		}
	}
	if fs := lockservice.Fetchers(); !slices.ContainsFunc(fs, func(f lockservice.Fetcher) bool { return f.Kind == kind.Etcd }) {
		t.Errorf("no fetcher for etcd's releases among %d", len(fs))
	}
	if lockservice.Registered("consul") {
		t.Error("consul has a start nobody registered")
	}
	if _, err := lockservice.Start(context.Background(), nil, lockservice.Config{Kind: "consul"}, ""); err == nil || !strings.Contains(err.Error(), `want zookeeper, redis, postgres, mariadb or etcd, got "consul"`) {
		t.Errorf("Start(consul): %v", err)
	}
}

// TestEverySettingsReadsBack: each kind's settings, as config.json writes them,
// read back as they were, and refuse a field they do not have; the flags of the
// kinds' settings are each one kind's.
func TestEverySettingsReadsBack(t *testing.T) {
	flags := map[string]string{}
	for _, spec := range lockservice.AllSettings() {
		for _, n := range spec.Kinds {
			data, err := json.Marshal(spec.Zero)
			if err != nil {
				t.Fatal(err)
			}
			back, err := lockservice.DecodeSettings(n, data)
			if err != nil || back != spec.Zero || !lockservice.Fits(n, back) {
				t.Errorf("%s: %s read back as %+v (%v)", n, data, back, err)
			}
			if _, err := lockservice.DecodeSettings(n, []byte(`{"zlc_nonsense":1}`)); err == nil {
				t.Errorf("%s: an unknown field was accepted", n)
			}
		}
		if spec.Flags == nil {
			continue
		}
		fs := flag.NewFlagSet(spec.Title, flag.ContinueOnError)
		if _, err := spec.Flags(fs)(); err != nil {
			t.Errorf("%s: the flags' defaults are refused: %v", spec.Title, err)
		}
		fs.VisitAll(func(f *flag.Flag) {
			if other, taken := flags[f.Name]; taken {
				t.Errorf("flag --%s is both %s's and %s's", f.Name, other, spec.Title)
			}
			flags[f.Name] = spec.Title
		})
	}
	if len(flags) == 0 {
		t.Error("no kind's settings have flags: is builtin linked?")
	}
	if _, ok := lockservice.SettingsOf("consul"); ok {
		t.Error("consul has settings nobody registered")
	}
}
