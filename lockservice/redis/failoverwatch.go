package redis

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// The sentinels, and a Redis Cluster's instances, fail over by themselves: nothing
// the run does marks the moment, so the run watches them and records each failover
// in the history, where the cause rule reads it as it reads the nemesis's own (a
// promoted replica that never saw a grant loses it).

// failoverPoll is how often each sentinel and each instance is asked what it knows.
const failoverPoll = 50 * time.Millisecond

// sentinelView is what one sentinel said of the primary: the address it names, in
// which configuration epoch (each failover's is higher: a sentinel that has not
// heard of the latest still names the old primary with the old epoch), and whether
// it is leading a failover of it (SENTINEL MASTER's failover_in_progress flag), or
// why it did not answer.
type sentinelView struct {
	sentinel   int
	primary    string
	epoch      int64
	inProgress bool
	err        error
}

// roleView is what one instance said of itself: whether it serves as a primary
// (INFO replication's role:master); one that did not answer serves nothing.
type roleView struct {
	addr    string
	primary bool
}

// span is a watch's failover in force, shared by the sentinels' watch and the
// cluster's: it opens when the servers are not settled, from the primary the watch
// knows then, and closes when they are settled again, naming the primary then
// (Promoted, when another) and every instance that served as a primary while it
// was open. One that ends with the same primary and no other is given up.
type span struct {
	by          string // what makes the servers' failovers: "sentinel", "cluster"
	persistence string
	// names maps an instance's client address to its name ("s2").
	names map[string]string
	// open says a failover is in force: from the primary at its start, served by
	// every instance that served as a primary during it.
	open   bool
	from   string
	served map[string]bool
}

// step opens a failover from primary when the servers are not settled and none is
// open, and closes the open one when they are, primary the one they settled on;
// serving are the instances that serve as a primary now. It returns the records it
// makes.
func (s *span) step(settled bool, primary string, serving map[string]bool) []lockservice.Failover {
	if s.open {
		maps.Copy(s.served, serving)
	}
	switch {
	case !settled && !s.open:
		s.open, s.from, s.served = true, primary, maps.Clone(serving)
		return []lockservice.Failover{{By: s.by, Primary: s.name(s.from), Persistence: s.persistence}}
	case settled && s.open:
		s.open = false
		f := lockservice.Failover{Stop: true, By: s.by, Primary: s.name(s.from), Persistence: s.persistence}
		if primary != s.from {
			f.Promoted = s.name(primary)
		}
		for addr := range s.served {
			f.Primaries = append(f.Primaries, s.name(addr))
		}
		slices.Sort(f.Primaries)
		f.Aborted = f.Promoted == "" && len(f.Primaries) <= 1
		return []lockservice.Failover{f}
	}
	return nil
}

// name is the instance at addr by name, or addr when it is none of the run's.
func (s *span) name(addr string) string {
	if n, ok := s.names[addr]; ok {
		return n
	}
	return addr
}

// sentinelWatch turns the sentinels' and the instances' views, one at a time, into
// failovers. The topology is settled when every sentinel that answers names the
// primary the watch knows and none leads a failover, and that primary serves and no
// other instance does. A failover is in force from the first view that unsettles it
// (the primary down, a sentinel leading a failover or naming another primary, a
// second instance serving as a primary: a killed primary restarted empty, an old
// primary cut off from the sentinels) until it is settled again; one that ends with
// the same primary and no other serving is given up (a primary restarted before the
// sentinels acted). Over that time two primaries may grant the
// same lock, each to clients that followed the sentinels at another moment. The
// primary the watch knows changes when a sentinel names another in a later epoch
// than the one it was named in (one naming an older primary in an older epoch has
// not heard yet).
type sentinelWatch struct {
	span
	primary string // the address the watch knows as the primary
	epoch   int64  // and the configuration epoch it was named in (sentinels' own)
	// named and leading are what each sentinel that answered last said; primaries
	// are the instances that serve as a primary.
	named     map[int]string
	leading   map[int]bool
	primaries map[string]bool
}

// newSentinelWatch is a settled watch of the primary at primary.
func newSentinelWatch(names map[string]string, persistence, primary string) *sentinelWatch {
	return &sentinelWatch{span: span{by: "sentinel", names: names, persistence: persistence}, primary: primary,
		named: map[int]string{}, leading: map[int]bool{}, primaries: map[string]bool{primary: true}}
}

// sentinel takes one sentinel's view and returns the records it makes.
func (w *sentinelWatch) sentinel(v sentinelView) []lockservice.Failover {
	delete(w.named, v.sentinel)
	delete(w.leading, v.sentinel)
	if v.err == nil && v.primary != "" {
		w.named[v.sentinel], w.leading[v.sentinel] = v.primary, v.inProgress
		if v.primary != w.primary && v.epoch > w.epoch {
			w.primary, w.epoch = v.primary, v.epoch
		}
	}
	return w.step(w.settled(), w.primary, w.primaries)
}

// role takes one instance's view and returns the records it makes.
func (w *sentinelWatch) role(v roleView) []lockservice.Failover {
	if v.primary {
		w.primaries[v.addr] = true
	} else {
		delete(w.primaries, v.addr)
	}
	return w.step(w.settled(), w.primary, w.primaries)
}

// settled says whether the topology is whole: one primary, which serves, named by
// every sentinel that answers, none leading a failover.
func (w *sentinelWatch) settled() bool {
	if !w.primaries[w.primary] {
		return false
	}
	for s, addr := range w.named {
		if addr != w.primary || w.leading[s] {
			return false
		}
	}
	for addr := range w.primaries {
		if addr != w.primary {
			return false
		}
	}
	return true
}

// WatchFailovers watches the servers that fail over on their own until ctx ends
// and calls seen, from one goroutine, for each failover: its start and its stop.
// On the sentinel topology it watches the sentinels and the instances
// (sentinelWatch), on the cluster topology every instance's view of the run's lock
// key's slot (clusterWatch); it returns at once on the others, whose servers make
// no failover of their own (FailsOverItself).
func (r *Redis) WatchFailovers(ctx context.Context, seen func(lockservice.Failover)) {
	if watch := r.failoverWatch(); watch != nil {
		watch(ctx, seen)
	}
}

// failoverWatch is the watch of the servers' own failovers on r's topology, nil on
// a topology whose servers make none. A topology FailsOverItself says fails over
// by itself has one (TestEveryTopologyThatFailsOverItselfIsWatched).
func (r *Redis) failoverWatch() func(context.Context, func(lockservice.Failover)) {
	switch {
	case !r.cfg.FailsOverItself():
		return nil
	case r.cfg.Topology == RedisSentinel:
		return r.watchSentinels
	case r.cfg.Topology == RedisCluster:
		return r.watchCluster
	}
	return nil
}

// names maps each instance's client address to its name in the history ("s2").
func (r *Redis) names() map[string]string {
	names := map[string]string{}
	for _, in := range r.Instances {
		names[in.ClientAddr()] = serverName(in.ID)
	}
	return names
}

// watchSentinels watches the sentinels and the instances until ctx ends and calls
// seen for each failover (sentinelWatch). Each sentinel and each instance is asked
// every failoverPoll, on its own, so that one out of reach does not slow the
// others; it returns once none is being asked.
func (r *Redis) watchSentinels(ctx context.Context, seen func(lockservice.Failover)) {
	if len(r.SentinelNodes) == 0 {
		return
	}
	w := newSentinelWatch(r.names(), string(r.Settings().WithDefaults().Persistence), r.Instances[0].ClientAddr())
	sentinels, roles := make(chan sentinelView), make(chan roleView)
	var pollers sync.WaitGroup
	defer pollers.Wait() // none asks a server once the watch has returned
	for _, s := range r.SentinelNodes {
		pollers.Go(func() { poll(ctx, sentinels, func() sentinelView { return r.viewOf(ctx, s) }) })
	}
	for _, in := range r.Instances {
		pollers.Go(func() {
			poll(ctx, roles, func() roleView {
				m, err := r.info(ctx, in, "replication")
				return roleView{addr: in.ClientAddr(), primary: err == nil && m["role"] == "master"}
			})
		})
	}
	for {
		var fs []lockservice.Failover
		select {
		case v := <-sentinels:
			fs = w.sentinel(v)
		case v := <-roles:
			fs = w.role(v)
		case <-ctx.Done():
			return
		}
		for _, f := range fs {
			seen(f)
		}
	}
}

// poll sends ask's answer to out every failoverPoll until ctx ends.
func poll[T any](ctx context.Context, out chan<- T, ask func() T) {
	for {
		v := ask()
		select {
		case out <- v:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(failoverPoll):
		case <-ctx.Done():
			return
		}
	}
}

// viewOf asks sentinel s what it knows of the primary.
func (r *Redis) viewOf(ctx context.Context, s *lockservice.Member) sentinelView {
	v := sentinelView{sentinel: s.ID}
	out, err := r.call(ctx, s, []string{"SENTINEL", "MASTER", SentinelMaster})
	if err != nil {
		v.err = err
		return v
	}
	m, err := replyFields(out[0])
	if err != nil {
		v.err = err
		return v
	}
	v.primary = net.JoinHostPort(m["ip"], m["port"])
	if v.epoch, err = strconv.ParseInt(m["config-epoch"], 10, 64); err != nil {
		v.err = fmt.Errorf("sentinel %d: SENTINEL MASTER's config-epoch: %w", s.ID, err)
		return v
	}
	v.inProgress = slices.Contains(strings.Split(m["flags"], ","), "failover_in_progress")
	return v
}

// serverName is an instance's name in the history ("s2"), as the nemesis names it.
func serverName(id int) string { return "s" + strconv.Itoa(id) }
