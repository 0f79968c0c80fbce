package harness

import (
	"context"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

func TestEnsembleStartsAndServes(t *testing.T) {
	requireIntegration(t)
	for _, nodes := range []int{3, 5} {
		ctx := context.Background()
		net, err := netns.Create(ctx, "t"+randomID()[:4])
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		e, err := StartEnsemble(ctx, net, EnsembleConfig{Nodes: nodes, Dir: t.TempDir()})
		if err != nil {
			net.Destroy()
			t.Fatal(err)
		}
		t.Logf("%d nodes serving after %s", nodes, time.Since(start))
		leaders := 0
		for _, st := range e.Statuses(ctx) {
			if !st.Serving() {
				t.Errorf("server %d not serving: %+v", st.ID, st)
			}
			if st.Mode == "leader" {
				leaders++
			}
		}
		if leaders != 1 {
			t.Errorf("want exactly one leader, got %d", leaders)
		}
		e.Stop()
		if err := net.Destroy(); err != nil {
			t.Fatal(err)
		}
		assertNothingLeft(t)
	}
}
