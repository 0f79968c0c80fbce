package redis

import (
	"context"
	"slices"
	"sync"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A Redis Cluster fails over by itself: when the majority of primaries have found a
// primary out of reach for the node timeout, its replica wins their votes and takes
// its slots in a newer configuration epoch. The run watches the slot of its lock
// key, the only one a lock recipe uses, in every instance's CLUSTER NODES.

// clusterAnswer is one instance's CLUSTER NODES, asked of the instance at addr, or
// why it did not answer.
type clusterAnswer struct {
	addr  string
	nodes []clusterNode
	err   error
}

// slotView is what one instance's CLUSTER NODES says of the watched slot.
type slotView struct {
	// owner is the primary it names for the slot ("" for none) and epoch that
	// primary's configuration epoch in its eyes.
	owner string
	epoch int64
	// failing are the instances it flags fail or fail? (PFAIL, its own opinion).
	failing []string
	// master says it is a primary itself, and claims that it serves the slot.
	master, claims bool
}

// readSlot is what answer a says of slot. The instance's own line ("myself") is
// taken to be at the address it was asked at, whatever address it lists for itself.
func readSlot(a clusterAnswer, slot int) slotView {
	nodes := slices.Clone(a.nodes)
	var v slotView
	for i, n := range nodes {
		if n.has("myself") {
			nodes[i].addr = a.addr
			v.master = n.has("master")
			v.claims = v.master && servesSlot(n, slot)
		}
		if n.has("fail") || n.has("fail?") {
			v.failing = append(v.failing, nodes[i].addr)
		}
	}
	if n, ok := claimOf(nodes, slot); ok {
		v.owner, v.epoch = n.addr, n.epoch
	}
	return v
}

// clusterWatch turns the instances' views of one slot, one at a time, into
// failovers. The slot is settled when every instance that answers names one
// primary for it, the one the watch knows, in the epoch the watch knows, none
// flags that primary fail or fail?, and that primary answers and says it is a
// primary serving the slot. A failover is in force from the first view that
// unsettles it (a view flags the primary failing, names another primary for the
// slot, or names a newer epoch for it; the primary does not answer) until it is
// settled again. Flags on any other instance, a replica's included, do not count:
// a replica flagged fail? for a moment changes nothing for the slot while its
// primary answers and every view names it. The primary the watch knows changes when
// a view names the slot's primary in a newer epoch (the cluster's own rule: an old
// primary cut off from the others still claims the slot in its own view, in its
// old epoch). Every instance whose own view claims the slot while a failover is in
// force is one of its primaries; one that ends with the same primary and no other
// is given up. The watch records nothing until it has found the slot settled once.
type clusterWatch struct {
	span
	slot int
	// primary is the address the watch knows as the slot's primary, and epoch its
	// configuration epoch (-1 before any view named one).
	primary string
	epoch   int64
	// views are what each instance that answered last said; primed says the slot
	// has been settled once.
	views  map[string]slotView
	primed bool
}

// newClusterWatch is a watch of slot that knows no primary yet.
func newClusterWatch(names map[string]string, persistence string, slot int) *clusterWatch {
	return &clusterWatch{span: span{by: "cluster", names: names, persistence: persistence},
		slot: slot, epoch: -1, views: map[string]slotView{}}
}

// view takes one instance's answer and returns the records it makes.
func (w *clusterWatch) view(a clusterAnswer) []lockservice.Failover {
	delete(w.views, a.addr)
	if a.err == nil {
		v := readSlot(a, w.slot)
		w.views[a.addr] = v
		if v.owner != "" && v.epoch > w.epoch {
			w.primary, w.epoch = v.owner, v.epoch
		}
	}
	settled := w.settled()
	if !w.primed {
		w.primed = settled
		return nil
	}
	claiming := map[string]bool{}
	for addr, v := range w.views {
		if v.claims {
			claiming[addr] = true
		}
	}
	return w.step(settled, w.primary, claiming)
}

// settled says whether the slot is whole: one primary, which answers as the slot's
// primary, named in one epoch by every instance that answers, flagged failing by
// none.
func (w *clusterWatch) settled() bool {
	if own, ok := w.views[w.primary]; !ok || !own.claims {
		return false
	}
	for _, v := range w.views {
		if v.owner != w.primary || v.epoch != w.epoch || slices.Contains(v.failing, w.primary) {
			return false
		}
	}
	return true
}

// watchCluster watches the slot of the run's lock key (SetLockKey) in every
// instance's CLUSTER NODES until ctx ends and calls seen for each failover
// (clusterWatch). Each instance is asked every failoverPoll, on its own; it returns
// once none is being asked. Without a lock key it returns at once: the run names it
// before the workload.
func (r *Redis) watchCluster(ctx context.Context, seen func(lockservice.Failover)) {
	key := r.lockKey.Load()
	if key == nil {
		return
	}
	w := newClusterWatch(r.names(), string(r.Settings().WithDefaults().Persistence), redisopt.KeySlot(*key))
	answers := make(chan clusterAnswer)
	var pollers sync.WaitGroup
	defer pollers.Wait() // none asks a server once the watch has returned
	for _, in := range r.Instances {
		pollers.Go(func() {
			poll(ctx, answers, func() clusterAnswer {
				nodes, err := r.clusterView(ctx, in)
				return clusterAnswer{addr: in.ClientAddr(), nodes: nodes, err: err}
			})
		})
	}
	for {
		select {
		case a := <-answers:
			for _, f := range w.view(a) {
				seen(f)
			}
		case <-ctx.Done():
			return
		}
	}
}
