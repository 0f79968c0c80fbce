package lockservice

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// TestSweepSummary: nothing removed says nothing; else one line naming each kind.
func TestSweepSummary(t *testing.T) {
	var r SweepReport
	if !r.Empty() || r.Summary() != "" {
		t.Errorf("an empty sweep says %q", r.Summary())
	}
	r = SweepReport{
		Net:     netns.Report{Namespaces: []string{"zlcab12hub", "zlcab12s1"}, Processes: []int{7}, Links: []string{"zlcab12up"}, Tables: []string{"zlc_ab12_uplink"}},
		Servers: []Leftover{{Kind: kind.Redis, Short: "redis-server 8"}, {Kind: kind.Postgres, Short: "postgres /x/zlcpg-s1 with pids [9]"}},
		Nodes:   []string{"zk1: directory /var/tmp/zlockcheck/zlcab12"},
	}
	s := r.Summary()
	if r.Empty() || strings.Contains(s, "\n") {
		t.Fatalf("summary %q: want one line", s)
	}
	for _, want := range []string{"2 namespaces (zlcab12hub, zlcab12s1)", "1 processes in them (7)", "host links (zlcab12up)",
		"host nft tables (zlc_ab12_uplink)", "2 servers whose run was gone (redis-server 8, postgres /x/zlcpg-s1 with pids [9])", "zk1: directory /var/tmp/zlockcheck/zlcab12"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
}
