package nemesis

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestParseConnPorts: the local ports of the connections to the servers, from ss's
// output, each once and sorted; connections to anything else are left alone.
func TestParseConnPorts(t *testing.T) {
	out := `ESTAB      0      0          10.77.2.3:41234     10.77.1.1:5432
ESTAB      0      0          10.77.2.3:40000     10.77.1.2:5432
FIN-WAIT-1 0      1          10.77.2.3:39999     10.77.1.1:5432
ESTAB      0      0          10.77.2.3:45555     10.77.0.1:9999
SYN-SENT   0      1          10.77.2.3:41234     10.77.1.1:5432
garbage
`
	servers := []netip.Addr{netip.MustParseAddr("10.77.1.1"), netip.MustParseAddr("10.77.1.2")}
	if got, want := parseConnPorts(out, servers), []int{39999, 40000, 41234}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := parseConnPorts("", servers); len(got) != 0 {
		t.Errorf("no connections: %v", got)
	}
}

// TestVanishRules: the table drops the dead connections' ports both ways, and ss
// destroys exactly those sockets.
func TestVanishRules(t *testing.T) {
	rules := strings.Join(vanishChains([]int{40000, 41234}), "")
	for _, want := range []string{"hook input", "tcp dport { 40000, 41234 } drop", "hook output", "tcp sport { 40000, 41234 } drop"} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules lack %q:\n%s", want, rules)
		}
	}
	argv := destroyArgv([]int{40000, 41234})
	if want := []string{"ss", "-K", "-tn", "state", "all", "( sport = :40000 or sport = :41234 )"}; !slices.Equal(argv, want) {
		t.Errorf("got %q, want %q", argv, want)
	}
}

// keeperCluster is the FAKE fakeCluster whose servers keep a vanished client's
// session (a SessionKeeper).
type keeperCluster struct{ *fakeCluster }

func (keeperCluster) VanishedClientKept() string { return "the servers' keepalive (now 2h11m15s)" }

// TestClientVanishPlan: the fault records its target and, where the servers keep a
// vanished client's session, what bounds that; it works in the worker's namespace.
func TestClientVanishPlan(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	fake := newFakeCluster(3, 2)
	for i := range fake.clients {
		fake.clients[i].Pid = 1000 + i
	}
	p, err := ClientVanish{Target: TargetRandomClient}.plan(ctx, fake, rng)
	if err != nil {
		t.Fatal(err)
	}
	if p.value["fault"] != string(ClassClientVanish) || p.value["process"] == nil || p.value["kept_until"] != nil {
		t.Errorf("record %v", p.value)
	}
	if got := netNames(p.nets); len(got) != 1 || !strings.HasPrefix(got[0], "zlc-fake-w") {
		t.Errorf("made in %v, want one worker's namespace", got)
	}
	p, err = ClientVanish{Target: TargetRandomClient}.plan(ctx, keeperCluster{fake}, rng)
	if err != nil {
		t.Fatal(err)
	}
	if p.value["kept_until"] != "the servers' keepalive (now 2h11m15s)" {
		t.Errorf("a keeper's record %v does not say what bounds the session", p.value)
	}
}
