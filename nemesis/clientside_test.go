package nemesis

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// clientSideHost is a FAKE server of an existing ensemble (nemesis.ClientSide): a
// fakeHost that says where its clients reach it.
type clientSideHost struct{ fakeHost }

func (h *clientSideHost) ClientAddr() netip.AddrPort { return netip.AddrPortFrom(h.Addr(), 2182) }

// clientSideCluster is the FAKE fakeCluster whose servers are all clientSideHosts.
type clientSideCluster struct{ *fakeCluster }

func (c clientSideCluster) Servers() []Server {
	ss := c.fakeCluster.Servers()
	for i := range ss {
		ss[i].Host = &clientSideHost{fakeHost{f: c.fakeCluster, id: ss[i].ID}}
	}
	return ss
}

func netNames(nets []netHost) []string {
	var out []string
	for _, n := range nets {
		out = append(out, n.String())
	}
	return out
}

// A client-server partition of servers the tool may not change is made in every
// worker's namespace; of servers it manages, on the servers' hosts.
func TestClientServerPartitionOfAnUnmanagedServerIsMadeOnTheWorkersSide(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	p, err := ClientServerPartition{Target: TargetOne}.plan(ctx, clientSideCluster{newFakeCluster(3, 2)}, rng)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := netNames(p.nets), []string{"zlc-fake-w1", "zlc-fake-w2"}; !slices.Equal(got, want) {
		t.Errorf("unmanaged servers: cut made in %v, want the workers' namespaces %v", got, want)
	}
	if p.value["clients"] != "workers' side" {
		t.Errorf("unmanaged servers: record %v does not say the cut is on the workers' side", p.value)
	}
	if err := p.apply(ctx); err == nil {
		t.Error("apply in namespaces that do not exist succeeded")
	}

	p, err = ClientServerPartition{Target: TargetOne}.plan(ctx, newFakeCluster(3, 2), rng)
	if err != nil {
		t.Fatal(err)
	}
	if got := netNames(p.nets); len(got) != 1 || !slices.Contains([]string{"zlc-fake-s1", "zlc-fake-s2", "zlc-fake-s3"}, got[0]) {
		t.Errorf("managed servers: cut made in %v, want one server's host", got)
	}
}
