package redisopt

import (
	"strings"
	"testing"
	"time"
)

// TestKeySlot: the slots Redis 7.0.15's CLUSTER KEYSLOT gave for these keys (hash
// tags, empty and nested braces included).
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"":                       0,
		"somekey":                11058,
		"foo":                    12182,
		"123456789":              12739,
		"foo{hash_tag}":          2515,
		"{user1000}.following":   3443,
		"foo{}{bar}":             8363,
		"foo{{bar}}zap":          4015,
		"foo{bar}{zap}":          5061,
		"/zlc/abc123/l0":         1872,
		"{/zlc/abc123/l0}:fence": 1872,
		"a{b":                    13340,
		"{a{b}:fence":            13340,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestSameSlot: the key beside a key hashes to its slot, its own hash tag kept; a
// key it cannot follow is an error.
func TestSameSlot(t *testing.T) {
	cases := []struct {
		key, suffix, want string
		bad               string // a word of the error, "" for none
	}{
		{"/zlc/abc123/l0", ":fence", "{/zlc/abc123/l0}:fence", ""},
		{"/zlc/abc123/l0-counter", ":fence", "{/zlc/abc123/l0-counter}:fence", ""},
		{"lock{app}", ":fence", "lock{app}:fence", ""},
		{"a{b", ":fence", "{a{b}:fence", ""},
		{"a}b", ":fence", "", "no hash tag"},
		{"a{}b", ":fence", "", "no hash tag"},
		{"lock", ":{x}", "", "brace"},
	}
	for _, c := range cases {
		got, err := SameSlot(c.key, c.suffix)
		switch {
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("SameSlot(%q, %q) = %q, %v; want an error saying %q", c.key, c.suffix, got, err, c.bad)
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("SameSlot(%q, %q) = %q, %v; want %q", c.key, c.suffix, got, err, c.want)
		case c.bad == "" && KeySlot(got) != KeySlot(c.key):
			t.Errorf("SameSlot(%q, %q) = %q: slot %d, the key's is %d", c.key, c.suffix, got, KeySlot(got), KeySlot(c.key))
		}
	}
}

// TestClusterOptionsSendNothingTwice: the cluster client's options keep Lock's
// bounds and never send a command again (MaxRedirects -1, MaxRetries -1).
func TestClusterOptionsSendNothingTwice(t *testing.T) {
	t.Setenv(PasswordVar, "secret")
	o := Cluster([]string{"10.0.0.1:6379", "10.0.0.2:6379"}, 250*time.Millisecond)
	switch {
	case o.MaxRedirects != -1 || o.MaxRetries != -1:
		t.Errorf("MaxRedirects %d, MaxRetries %d; want -1 and -1", o.MaxRedirects, o.MaxRetries)
	case o.ReadTimeout != 250*time.Millisecond || o.DialTimeout != 250*time.Millisecond || o.PoolSize != 1 || o.Protocol != 2:
		t.Errorf("not Lock's bounds: %+v", o)
	case o.Password != "secret":
		t.Errorf("Password %q, want the one in %s", o.Password, PasswordVar)
	case o.ClusterStateReloadInterval != ClusterStateReload || len(o.Addrs) != 2:
		t.Errorf("reload %s, addrs %v", o.ClusterStateReloadInterval, o.Addrs)
	}
}
