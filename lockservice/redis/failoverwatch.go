package redis

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// The sentinels fail over by themselves: nothing the run does marks the moment, so
// the run watches them and records each failover in the history, where the cause
// rule reads it as it reads the nemesis's own (a promoted replica that never saw a
// grant loses it).

// failoverPoll is how often each sentinel is asked what it knows of the primary.
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

// failoverWatch turns the sentinels' views, one at a time, into failovers: one starts
// when a sentinel leads one, and stops when a sentinel names another primary in an
// epoch later than the one the watch's primary was named in (one naming an older
// primary in an older epoch has not heard yet), or,
// when every sentinel has answered since the start and none leads one or names
// another primary, as given up. A switch seen with no start (the sentinel that led
// it was out of reach) is both at once.
type failoverWatch struct {
	// names maps an instance's client address to its name ("s2").
	names       map[string]string
	persistence string
	sentinels   int
	primary     string // the address the watch knows as the primary
	epoch       int64  // and the configuration epoch it was named in (sentinels' own)
	started     bool
	// answered are the sentinels that answered since the start, and did not lead.
	answered map[int]bool
}

// observe takes one view and returns the failover records it makes (none, a start,
// a stop, or both).
func (w *failoverWatch) observe(v sentinelView) []lockservice.Failover {
	if v.err != nil || v.primary == "" || v.epoch < w.epoch {
		return nil
	}
	var out []lockservice.Failover
	if v.primary != w.primary {
		if v.epoch == w.epoch {
			return nil // not a failover's: an epoch names one primary
		}
		if !w.started {
			out = append(out, w.record(false, ""))
		}
		out = append(out, w.record(true, v.primary))
		w.primary, w.epoch, w.started = v.primary, v.epoch, false
		return out
	}
	// The same primary in a later epoch is the leader's failover under way: it takes
	// the epoch once the replica it promotes answers as a primary, and names it at
	// the switch.
	switch {
	case v.inProgress && !w.started:
		w.started, w.answered = true, map[int]bool{}
		return []lockservice.Failover{w.record(false, "")}
	case w.started && !v.inProgress:
		w.answered[v.sentinel] = true
		if len(w.answered) == w.sentinels {
			w.started = false
			f := w.record(true, "")
			f.Aborted = true
			return []lockservice.Failover{f}
		}
	case w.started:
		delete(w.answered, v.sentinel) // still leading it
	}
	return nil
}

// record is a start (stop false) or a stop that promoted the instance at promoted
// ("" when none).
func (w *failoverWatch) record(stop bool, promoted string) lockservice.Failover {
	f := lockservice.Failover{Stop: stop, By: "sentinel", Primary: w.name(w.primary), Persistence: w.persistence}
	if promoted != "" {
		f.Promoted = w.name(promoted)
	}
	return f
}

// name is the instance at addr by name, or addr when it is none of the run's.
func (w *failoverWatch) name(addr string) string {
	if n, ok := w.names[addr]; ok {
		return n
	}
	return addr
}

// WatchFailovers watches the sentinels until ctx ends and calls seen, from one
// goroutine, for each failover they make: its start and its stop (see
// failoverWatch). Each sentinel is asked every failoverPoll, on its own, so that
// one out of reach does not slow the others. It returns at once on another topology.
func (r *Redis) WatchFailovers(ctx context.Context, seen func(lockservice.Failover)) {
	if r.cfg.Topology != RedisSentinel || len(r.SentinelNodes) == 0 {
		return
	}
	w := &failoverWatch{names: map[string]string{}, persistence: string(r.Settings().WithDefaults().Persistence),
		sentinels: len(r.SentinelNodes), primary: r.Instances[0].ClientAddr()}
	for _, in := range r.Instances {
		w.names[in.ClientAddr()] = serverName(in.ID)
	}
	views := make(chan sentinelView)
	for _, s := range r.SentinelNodes {
		go func() {
			for {
				v := r.viewOf(ctx, s)
				select {
				case views <- v:
				case <-ctx.Done():
					return
				}
				select {
				case <-time.After(failoverPoll):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case v := <-views:
			for _, f := range w.observe(v) {
				seen(f)
			}
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
