package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	_ Fault = (*ClientPartition)(nil)
	_ Fault = (*SessionExpire)(nil)
	_ Fault = (*ClientPause)(nil)
	_ Fault = (*ClientKill)(nil)
	_ Fault = (*ClientServerPartition)(nil)
	_ Fault = (*ReplyLoss)(nil)
	_ Fault = (*WatchesOnly)(nil)
	_ fault = (*ClientPartition)(nil)
	_ fault = (*SessionExpire)(nil)
	_ fault = (*ClientPause)(nil)
	_ fault = (*ClientKill)(nil)
	_ fault = (*ClientServerPartition)(nil)
	_ fault = (*ReplyLoss)(nil)
	_ fault = (*WatchesOnly)(nil)
)

func serverAddrs(c Cluster) []netip.Addr {
	ss := sortedServers(c)
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = s.Host.Addr()
	}
	return out
}

// ClientPartition cuts one worker off from every server: an nftables table zlc_isolate
// in the worker's namespace drops input from and output to all server addresses. Held
// longer than the session timeout (the schedule holds it about twice that), the
// servers expire the worker's session while the worker keeps running. Undo deletes the
// table.
type ClientPartition struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply cuts the target worker off.
func (f ClientPartition) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ClientPartition) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	return workerTablePlan(ctx, c, rng, ClassClientPartition, f.Target, f.HolderWait, tableIsolate,
		func(set string) []string {
			return []string{chain("input", "ip saddr "+set+" drop"), chain("output", "ip daddr "+set+" drop")}
		})
}

// workerTablePlan plans a fault that installs one nftables table in a chosen worker's
// namespace, its chains built from the set of server addresses; undo deletes the table.
func workerTablePlan(ctx context.Context, c Cluster, rng *rand.Rand, class Class, target ClientTarget,
	wait time.Duration, table string, chains func(serverSet string) []string) (plan, error) {
	cl, picked, err := pickClient(ctx, c, target, wait, rng)
	v := clientValue(string(class), target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	set, err := addrSet(serverAddrs(c))
	if err != nil {
		return plan{value: v}, err
	}
	ns := workerNet(cl.Netns)
	cs := chains(set)
	return plan{
		value: v,
		nets:  []netHost{ns},
		apply: func(ctx context.Context) error {
			return nftReplace(ctx, ns, table, cs...)
		},
		undo: deleteTables([]netHost{ns}, table),
	}, nil
}

// SessionExpirer is a service that ends a worker's session itself, as its expiry
// would (etcd revokes the lease the worker reported as its session); server is the
// server that did it (0: not known). SessionExpire asks it first.
type SessionExpirer interface {
	ExpireSession(ctx context.Context, session string) (server int, err error)
}

// SessionExpire makes the servers expire one worker's session now, while the worker
// keeps running. On a service that is a SessionExpirer, it asks it; on ZooKeeper it attaches a connection of its own (from the harness's namespace) to
// the worker's session with the session's id and password and sends closeSession. The
// worker's ephemeral nodes vanish at once; the worker learns its session expired when
// it next talks to a server. It needs the worker to have reported its session id and
// password. There is nothing to undo.
type SessionExpire struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
	// SessionTimeout is the timeout sent when attaching to the session: the workers'
	// session timeout (required; the schedule gives its own).
	SessionTimeout time.Duration
}

// Apply expires the target worker's session.
func (f SessionExpire) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f SessionExpire) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v := clientValue(string(ClassSessionExpire), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	if cl.SessionID == "" {
		return plan{value: v}, fmt.Errorf("worker %d did not report its session id; use client-partition", cl.Process)
	}
	if ex, ok := abilityOf[SessionExpirer](c); ok {
		return plan{value: v, undo: noUndo, apply: func(ctx context.Context) error {
			server, err := ex.ExpireSession(ctx, cl.SessionID)
			if err == nil && server > 0 {
				v["server"] = serverName(server)
			}
			return err
		}}, nil
	}
	if cl.Passwd == "" {
		return plan{value: v}, fmt.Errorf("worker %d did not report its session password; use client-partition", cl.Process)
	}
	id, err := parseSessionID(cl.SessionID)
	if err != nil {
		return plan{value: v}, fmt.Errorf("worker %d: %w", cl.Process, err)
	}
	passwd, err := parsePasswd(cl.Passwd)
	if err != nil {
		return plan{value: v}, fmt.Errorf("worker %d: %w", cl.Process, err)
	}
	timeout := f.SessionTimeout
	if timeout <= 0 {
		return plan{value: v}, fmt.Errorf("session-expire: no session timeout to attach to worker %d's session with", cl.Process)
	}
	ss := sortedServers(c)
	rng.Shuffle(len(ss), func(i, j int) { ss[i], ss[j] = ss[j], ss[i] })
	return plan{
		value: v,
		apply: func(ctx context.Context) error { return expireOn(ctx, c, ss, id, passwd, timeout, v) },
		undo:  noUndo,
	}, nil
}

// expireOn closes session id through the first of ss that will do it, and notes in v
// which one did. A refusal is final (the session is gone: it expired, or the password
// is wrong), except after a close that went unanswered: a server closes every
// connection of a session it closes, sometimes ours before the reply, so a refusal
// by the next server then confirms the close.
func expireOn(ctx context.Context, c Cluster, ss []Server, id int64, passwd []byte, timeout time.Duration, v map[string]any) error {
	var errs []error
	unanswered := ""
	ss = slices.Clone(ss)
	for i := 0; i < len(ss); i++ {
		s := ss[i]
		if err := checkAddr(s.Host.Addr()); err != nil {
			return err
		}
		addr := netip.AddrPortFrom(s.Host.Addr(), clientPort).String()
		conn, err := c.Dial(ctx, addr, 2*time.Second)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", serverName(s.ID), err))
			continue
		}
		zxid, err := closeSession(ctx, conn, id, passwd, timeout)
		_ = conn.Close()
		var refused *sessionRefusedError
		var sent *closeUnansweredError
		switch {
		case errors.As(err, &refused) && unanswered != "":
			v["server"] = unanswered
			v["zxid"] = "unknown: the connection closed before the reply"
			v["confirmed_by"] = serverName(s.ID) + " (it no longer knows the session)"
			return nil
		case errors.As(err, &refused):
			return fmt.Errorf("%s: %w", serverName(s.ID), err)
		case errors.As(err, &sent) && unanswered == "":
			// Ask once more, the same server last (a standalone server is all there is).
			unanswered = serverName(s.ID)
			ss = append(ss, s)
			fallthrough
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", serverName(s.ID), err))
			if ctx.Err() != nil {
				return fmt.Errorf("no server closed the session: %w", errors.Join(errs...))
			}
			continue
		}
		v["server"] = serverName(s.ID)
		v["zxid"] = "0x" + strconv.FormatInt(zxid, 16)
		return nil
	}
	return fmt.Errorf("no server closed the session: %w", errors.Join(errs...))
}

// ClientPause stops a worker's process group with SIGSTOP (the GC-pause case): held
// longer than the session timeout (the schedule holds it about twice that), the
// servers expire the session while the worker, frozen, still believes what it
// believed. Undo resumes it with SIGCONT.
type ClientPause struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply pauses the target worker.
func (f ClientPause) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ClientPause) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v := clientValue(string(ClassClientPause), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	if cl.Pid <= 1 {
		return plan{value: v}, fmt.Errorf("worker %d has no process id", cl.Process)
	}
	groups := []int{cl.Pid}
	return plan{value: v, apply: stopGroups(groups), undo: resumeGroups(groups), pids: groups}, nil
}

// ClientKill SIGKILLs a worker's process group. The harness replaces the worker with
// a new process (a new session); Undo has nothing to do.
type ClientKill struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply kills the target worker.
func (f ClientKill) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ClientKill) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v := clientValue(string(ClassClientKill), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	if cl.Pid <= 1 {
		return plan{value: v}, fmt.Errorf("worker %d has no process id", cl.Process)
	}
	return plan{
		value: v,
		apply: func(context.Context) error {
			err := killWorker(c, cl)
			if errors.Is(err, syscall.ESRCH) {
				return nil // already gone
			}
			return err
		},
		undo: noUndo,
	}, nil
}

// DeathRecorder is a Cluster that wants to hear the moment a fault kills one of its
// workers (client-kill, client-vanish), before the kill: a database frees a dead
// session's locks as soon as its connection closes, so the worker's hold ends then,
// not when the harness notices it exited.
type DeathRecorder interface {
	Cluster
	// Killing says that worker cl is about to be killed.
	Killing(cl Client)
}

// killWorker SIGKILLs cl's process group, telling c first when it is a DeathRecorder.
func killWorker(c Cluster, cl Client) error {
	if d, ok := c.(DeathRecorder); ok {
		d.Killing(cl)
	}
	return signalGroup(cl.Pid, syscall.SIGKILL)
}

// ClientServerPartition cuts one server off from its clients (never from its peers):
// an nftables table zlc_clientcut in the server's namespace drops input from and
// output to the workers (the worker subnet 10.77.2.0/24, or what the host says:
// HostNetwork) on the client port. Its clients lose their connection, in the
// middle of whatever they were doing, and fail over to other servers. Undo deletes the
// table.
type ClientServerPartition struct {
	// Target says which server: TargetOne or TargetLeader (other targets are
	// accepted and cut off every chosen server's clients).
	Target Target
}

// Apply cuts the target server's clients off.
func (f ClientServerPartition) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ClientServerPartition) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassClientServerPartition), "target": string(f.Target)}
	ids, err := pickRecorded(ctx, c, v, f.Target, rng)
	if err != nil {
		return plan{value: v}, err
	}
	servers := serversByID(c, ids)
	if cut, ok := clientSideCut(servers); ok {
		return workerSideCut(c, v, cut), nil
	}
	nss := serverHosts(servers)
	var clients []string
	for _, ns := range nss {
		if cl := hostClients(ns); !slices.Contains(clients, cl) {
			clients = append(clients, cl)
		}
	}
	v["clients"] = strings.Join(clients, ",")
	return plan{
		value: v,
		nets:  nss,
		apply: func(ctx context.Context) error {
			for _, ns := range nss {
				// Only the client port: on a real host the workers' traffic shares its
				// source with this machine's SSH connection, which must go on working.
				cl, port := hostClients(ns), portSet(servers)
				if err := nftReplace(ctx, ns, tableClientCut,
					chain("input", "ip saddr "+cl+" tcp dport "+port+" drop"),
					chain("output", "ip daddr "+cl+" tcp sport "+port+" drop")); err != nil {
					return err
				}
			}
			return nil
		},
		undo: deleteTables(nss, tableClientCut),
	}, nil
}

// clientSideCut returns the client addresses of servers when every one of them is
// ClientSide (no server fault may touch it).
func clientSideCut(servers []Server) ([]netip.AddrPort, bool) {
	var addrs []netip.AddrPort
	for _, s := range servers {
		cs, ok := s.Host.(ClientSide)
		if !ok {
			return nil, false
		}
		addrs = append(addrs, cs.ClientAddr())
	}
	return addrs, len(addrs) > 0
}

// workerSideCut is a client-server partition made in the workers' namespaces (table
// zlc_servercut in each live worker's slot: output to and input from the servers'
// client addresses dropped): the servers are not the tool's to change. A worker
// replaced while the cut lasts keeps its slot's namespace, and so the cut.
func workerSideCut(c Cluster, v map[string]any, addrs []netip.AddrPort) plan {
	var nets []netHost
	for _, cl := range c.Clients() {
		if cl.Netns != "" && !slices.ContainsFunc(nets, func(h netHost) bool { return h.String() == cl.Netns }) {
			nets = append(nets, workerNet(cl.Netns))
		}
	}
	var out, in []string
	for _, a := range addrs {
		out = append(out, fmt.Sprintf("ip daddr %s tcp dport %d drop", a.Addr(), a.Port()))
		in = append(in, fmt.Sprintf("ip saddr %s tcp sport %d drop", a.Addr(), a.Port()))
	}
	rules := []string{chain("output", out...), chain("input", in...)}
	v["clients"] = "workers' side"
	return plan{
		value: v,
		nets:  nets,
		apply: func(ctx context.Context) error {
			for _, ns := range nets {
				if err := nftReplace(ctx, ns, tableServerCut, rules...); err != nil {
					return err
				}
			}
			return nil
		},
		undo: deleteTables(nets, tableServerCut),
	}
}

// ReplyLossFraction is how long, as a fraction of the session timeout, the schedule
// holds a ReplyLoss. The point is a client that sees connection loss but keeps its
// session, so that a create or delete the server applied is reported to it as
// connection loss (the orphan-node case).
//
//   - Longer than 2/3: go-zookeeper, Curator and Kazoo give up on a silent connection
//     after their read timeout, 2/3 of the session timeout, measured from the last
//     reply they read. Replies stop when the loss starts, so every client has dropped
//     its connection by 2/3 of a session timeout into the loss.
//   - Shorter than 1: the client's requests and pings (sent every 1/3) still reach
//     the servers until it drops the connection, so their expiry clock restarts
//     after the loss began and they cannot expire the session before a session
//     timeout into the loss; Curator, too, declares a session lost only after a
//     session timeout without a connection. Healing before that lets the client
//     reconnect in time.
//
// 0.85 sits between the two with slack on both sides: 0.18 of a session timeout past
// the read timeout for timer and scheduling jitter, and at least 0.15 (typically
// about 0.5) before the servers can expire the session. A client that paces its
// reconnects coarsely (go-zookeeper spends up to 1 s per server, then pauses 1 s) may
// still miss that window with short session timeouts and see its session expire:
// also a fault worth having.
const ReplyLossFraction = 0.85

// ReplyLoss drops, one way, only the packets from the servers' client port to one
// worker (table zlc_replyloss in the worker's namespace, input chain): its requests
// still arrive and are applied, the replies never come. Undo deletes the table. See
// ReplyLossFraction for how long to hold it.
type ReplyLoss struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply starts dropping the replies to the target worker.
func (f ReplyLoss) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ReplyLoss) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	return workerTablePlan(ctx, c, rng, ClassReplyLoss, f.Target, f.HolderWait, tableReplyLoss,
		func(set string) []string {
			return []string{chain("input", fmt.Sprintf("ip saddr %s tcp sport %s drop", set, portSet(c.Servers())))}
		})
}

// WatchesOnly drops, in one worker's namespace (table zlc_watchesonly, input chain),
// every packet from the servers' client port whose ZooKeeper frame is not a watch
// notification (a reply header with xid -1): the worker hears that a node it watches
// changed, but the replies to what it asks next never come, nor do ping replies or a
// new connection's handshake reply. TCP handshakes and bare ACKs pass. Held for longer
// than the client's read timeout (2/3 of the session timeout) after a watch fires,
// it turns the request that the wake-up causes (a lock recipe's getChildren) into a
// connection loss while the session lives on: the client's requests still arrive,
// so does its reconnect. Only the first frame of a segment is looked at (nftables
// reads the xid at payload offset 4). It is not one of the schedule's classes; tests
// aim it. Undo deletes the table.
type WatchesOnly struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply starts dropping every reply but watch notifications to the target worker.
func (f WatchesOnly) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f WatchesOnly) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	return workerTablePlan(ctx, c, rng, Class("watches-only"), f.Target, f.HolderWait, tableWatchesOnly,
		func(set string) []string {
			// @ih is the transport payload: bits 32-63 are the frame's xid.
			return []string{chain("input", fmt.Sprintf("ip saddr %s tcp sport %s @ih,32,32 != 0xffffffff drop", set, portSet(c.Servers())))}
		})
}
