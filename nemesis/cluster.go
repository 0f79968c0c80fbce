package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Server is one ZooKeeper server as the nemesis sees it.
type Server struct {
	// ID is the server's myid, from 1.
	ID int
	// Host is where the server runs; every fault on a server goes through it.
	Host ServerHost
	// ClientPort is the TCP port its clients connect to (0: ZooKeeper's, 2181).
	ClientPort int
	// Observer is a ZooKeeper observer: it serves clients and follows the leader but
	// does not vote. The quorum's targets and shapes (minority, majority, halves,
	// majorities-ring, bridge) count only the voters; the others take any server.
	Observer bool
}

// role is how a fault record names a server's part: observer or, for any other
// server that is not the leader, follower.
func (s Server) role() string {
	if s.Observer {
		return "observer"
	}
	return "follower"
}

// voters are the ids of the servers of ss that vote (not observers), in ss's order.
func voters(ss []Server) []int {
	var out []int
	for _, s := range ss {
		if !s.Observer {
			out = append(out, s.ID)
		}
	}
	return out
}

// Port is the TCP port the server's clients connect to.
func (s Server) Port() int {
	if s.ClientPort == 0 {
		return clientPort
	}
	return s.ClientPort
}

// portSet is the client ports of ss as an nftables expression: one port, or a set.
func portSet(ss []Server) string {
	var ports []string
	for _, s := range ss {
		if p := strconv.Itoa(s.Port()); !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) == 1 {
		return ports[0]
	}
	return "{ " + strings.Join(ports, ", ") + " }"
}

// ServerHost is where one ZooKeeper server runs: everything the nemesis, and the
// harness, do to a server (start it, kill it, signal it, change its network, read its
// log) goes through it. The harness implements it with a network namespace of this
// machine; a host of another kind (a node reached over SSH) implements the same
// methods, and neither the faults nor the run change.
type ServerHost interface {
	// String says where the server runs, for messages and as the host's key (e.g. its
	// namespace's name).
	String() string
	// Addr is the server's address on the run network: its peers and clients reach it
	// there.
	Addr() netip.Addr
	// Pid is the server's process id (the leader of its process group), 0 when it is
	// not running.
	Pid() int
	// Start starts the server with its config and data dir, after Kill (or for the
	// first time). It does not wait for it to serve; starting a running server is an
	// error.
	Start(ctx context.Context) error
	// Kill SIGKILLs the server and waits for it to exit; a server that is not running
	// is left alone.
	Kill(ctx context.Context) error
	// Signal sends sig (SIGSTOP, SIGCONT) to the server's process group; when the
	// server is not running the error wraps ErrNotRunning.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Exec runs argv in the server's network (nft, tc), feeding it stdin, and returns
	// its combined output. When the host no longer exists the error wraps ErrHostGone.
	Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
	// TablePrefix starts the name of every nftables table the nemesis makes on the
	// host ("zlc_" in a namespace of the run's own; a host shared with other runs adds
	// the run's id), so that HealAll removes exactly those.
	TablePrefix() string
	// LogTail returns the last n lines of the server's log.
	LogTail(ctx context.Context, n int) ([]string, error)
}

// HostNetwork is what a ServerHost whose network is not one of the run's own (a node
// reached over SSH) says about it, where the run's conventions (the link eth0, the run
// subnet 10.77.0.0/16, the workers on 10.77.2.0/24) do not hold. A host without it
// follows the conventions.
type HostNetwork interface {
	// Link is the server's interface towards its peers and clients: tc and the
	// packet-loss rules act on it.
	Link(ctx context.Context) (string, error)
	// Clients is where the workers' traffic comes from as the server sees it (this
	// machine's address, when it masquerades them): client-server-partition drops
	// it, on the client port only.
	Clients() netip.Prefix
}

// ClientSide is implemented by a ServerHost the tool may not change (a server of an
// existing ensemble, reached with run --connect): a fault that would change the
// server's own network acts in the workers' namespaces instead (client-server-partition
// drops, in every worker slot, the traffic to and from the server's client address).
type ClientSide interface {
	// ClientAddr is where the server's clients reach it.
	ClientAddr() netip.AddrPort
}

// ErrHostGone is what a host's Exec error wraps when the host no longer exists (a
// namespace deleted at the end of a run): there is nothing left to undo on it.
var ErrHostGone = netns.ErrGone

// ErrNotRunning is what ServerHost.Signal's error wraps when the server is not
// running.
var ErrNotRunning = errors.New("server not running")

// netHost is a network the nemesis changes with nft and tc: a server's host, or a
// worker slot's namespace (workerNet).
type netHost interface {
	String() string
	Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
	TablePrefix() string
}

// Client is one live worker process. Workers always run on this machine, each in a
// network namespace of the run, so client faults reach them directly.
type Client struct {
	// Process is the worker's history process id.
	Process int
	// Slot is the worker slot (its namespace); a replacement process reuses it.
	Slot int
	// Netns is the slot's network namespace.
	Netns string
	// Addr is the slot's address on the run network.
	Addr netip.Addr
	// Pid leads the worker's process group.
	Pid int
	// SessionID is the worker's ZooKeeper session id, "0x..." (empty if unreported).
	SessionID string
	// Passwd is the session password, base64 (empty if unreported).
	Passwd string
	// LockSession is the connection that holds the worker's latest lock, as its
	// acquire said (workloads.LockPlace.Session; empty: it did not say): a pooled
	// client's lock need not be on the session it reported last.
	LockSession string
}

// LockSessionID is the session that holds the client's lock: the one its acquire
// named, else the one it reported last.
func (cl Client) LockSessionID() string {
	if cl.LockSession != "" {
		return cl.LockSession
	}
	return cl.SessionID
}

// Cluster is the run as the nemesis needs it; the harness implements it. The servers
// themselves are reached through their hosts (Server.Host).
type Cluster interface {
	// Servers lists every server of the ensemble, running or not.
	Servers() []Server
	// Leader asks the servers (srvr) which one leads.
	Leader(ctx context.Context) (id int, ok bool)
	// Clients lists the live worker processes.
	Clients() []Client
	// Holder returns a worker that certainly holds the lock right now.
	Holder() (Client, bool)
	// Idle returns a worker between two lock cycles: no request in flight, holding
	// nothing, so its next request will be an acquire.
	Idle() (Client, bool)
	// Waiter returns a worker waiting for the lock while its holder releases it.
	Waiter() (Client, bool)
	// ServerOf returns the server the worker's session is connected to, when the
	// servers say (their client connections).
	ServerOf(ctx context.Context, cl Client) (id int, ok bool)
	// Dial opens a TCP connection from the harness's namespace to addr on the run
	// network.
	Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error)
}

// ServiceHolder is a Cluster that hands out the run's lock service: a fault asks it
// for the optional abilities the fault needs (SessionKiller, StandbyPromoter,
// SessionKeeper, RedisAdmin), which the services implement themselves.
type ServiceHolder interface {
	Service() any
}

// abilityOf returns the run's service as ability T: the service a ServiceHolder
// hands out, else the Cluster itself (a test's fake may be both).
func abilityOf[T any](c Cluster) (T, bool) {
	var svc any = c
	if h, ok := c.(ServiceHolder); ok {
		svc = h.Service()
	}
	t, ok := svc.(T)
	return t, ok
}

// Applied is a fault that was applied: what was done to whom, and how to take it back.
type Applied struct {
	// Value says what was done to whom; it is JSON-able (strings, numbers, slices and
	// maps of those), e.g. {"fault":"partition","shape":"isolate-leader","grudge":{...}}.
	Value map[string]any
	// Undo takes the fault back. It is idempotent, safe to call concurrently, and safe
	// after a failed or partial Apply. It is never nil.
	Undo func(ctx context.Context) error
}

// Fault is something the nemesis can do to a cluster. Apply picks its targets with rng
// (math/rand/v2) and the cluster's current state, does the fault, and returns what it
// did with the closure that undoes it; on error the returned Undo still takes back
// whatever part was done.
type Fault interface {
	Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error)
}

// fault is how the runner uses a Fault: in two steps, so it can record the fault's
// start, with its targets, before anything is done.
type fault interface {
	Fault
	plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error)
}

// plan is a fault resolved against the cluster: targets chosen, nothing done yet.
type plan struct {
	// value is what will be done to whom; apply may add to it (e.g. which server it
	// went through).
	value map[string]any
	// apply does the fault.
	apply func(ctx context.Context) error
	// undo takes back whatever apply did; it must be idempotent and work after a
	// partial apply or none.
	undo func(ctx context.Context) error
	// nets are the hosts and namespaces the fault writes nftables tables (or a netem
	// qdisc) into.
	nets []netHost
	// pids are the workers' process groups the fault may stop.
	pids []int
}

// run applies a plan the way Fault.Apply does.
func run(ctx context.Context, f fault, c Cluster, rng *rand.Rand) (Applied, error) {
	p, err := f.plan(ctx, c, rng)
	if err != nil {
		return Applied{Value: p.value, Undo: noUndo}, err
	}
	undo := once(p.undo)
	if err := p.apply(ctx); err != nil {
		return Applied{Value: p.value, Undo: undo}, err
	}
	return Applied{Value: p.value, Undo: undo}, nil
}

func noUndo(context.Context) error { return nil }

// once wraps an idempotent undo so that after it first succeeds, further calls do
// nothing (a later fault on the same target is not taken back by an old undo), and
// calls never overlap.
func once(undo func(context.Context) error) func(context.Context) error {
	if undo == nil {
		return noUndo
	}
	var mu sync.Mutex
	done := false
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil
		}
		if err := undo(ctx); err != nil {
			return err
		}
		done = true
		return nil
	}
}

// Target says which servers a server fault hits.
type Target string

// Server targets.
const (
	// TargetOne is one server chosen at random.
	TargetOne Target = "one"
	// TargetLeader is the current leader (a random server when there is none).
	TargetLeader Target = "leader"
	// TargetMinority is a random minority of the n voting servers: (n-1)/2, at least
	// one (observers, which do not vote, are not counted).
	TargetMinority Target = "minority"
	// TargetMajority is a random majority of the n voting servers: n/2+1.
	TargetMajority Target = "majority"
	// TargetAll is every server.
	TargetAll Target = "all"
)

// ServerTargets lists every server target.
func ServerTargets() []Target {
	return []Target{TargetOne, TargetLeader, TargetMinority, TargetMajority, TargetAll}
}

// ClientTarget says which worker a client fault hits.
type ClientTarget string

// Client targets.
const (
	// TargetRandomClient is a live worker chosen at random.
	TargetRandomClient ClientTarget = "random"
	// TargetHolder is the worker that holds the lock; if none holds it within the
	// fault's HolderWait, a random worker.
	TargetHolder ClientTarget = "holder"
	// TargetIdle is a worker between two lock cycles (its next request is an acquire,
	// so a fault that starts now lands on the acquire's first steps, e.g. the lock
	// node's create); if none is idle within the fault's HolderWait, a random worker.
	// Workers idle only with a think time between cycles (run --think-max).
	TargetIdle ClientTarget = "idle"
	// TargetWaiter is a worker waiting for the lock while the holder releases it: the
	// waiter about to be woken (if none within the fault's HolderWait, a random
	// worker).
	TargetWaiter ClientTarget = "waiter"
)

// ClientTargets lists every client target.
func ClientTargets() []ClientTarget {
	return []ClientTarget{TargetRandomClient, TargetHolder, TargetIdle, TargetWaiter}
}

// DefaultHolderWait is how long a fault aimed at the lock holder waits for one.
const DefaultHolderWait = 2 * time.Second

func serverName(id int) string { return fmt.Sprintf("s%d", id) }

func serverNames(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = serverName(id)
	}
	return out
}

// sortedServers returns the cluster's servers ordered by id.
func sortedServers(c Cluster) []Server {
	ss := append([]Server(nil), c.Servers()...)
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
	return ss
}

func serverByID(ss []Server, id int) (Server, bool) {
	for _, s := range ss {
		if s.ID == id {
			return s, true
		}
	}
	return Server{}, false
}

// serversByID returns the cluster's servers with the given ids, in that order.
func serversByID(c Cluster, ids []int) []Server {
	ss := sortedServers(c)
	out := make([]Server, 0, len(ids))
	for _, id := range ids {
		if s, ok := serverByID(ss, id); ok {
			out = append(out, s)
		}
	}
	return out
}

// serverHosts returns the servers' hosts, as networks to change.
func serverHosts(ss []Server) []netHost {
	out := make([]netHost, len(ss))
	for i, s := range ss {
		out[i] = s.Host
	}
	return out
}

func majority(n int) int { return n/2 + 1 }

// pickRecorded chooses target's servers (pickServers) and records them in a fault's
// record v (recordServers).
func pickRecorded(ctx context.Context, c Cluster, v map[string]any, t Target, rng *rand.Rand) ([]int, error) {
	ids, note, err := pickServers(ctx, c, t, rng)
	if err != nil {
		return nil, err
	}
	recordServers(v, ids, note)
	return ids, nil
}

// recordServers notes in a fault's record v the servers it acts on and, when set, why
// those (note).
func recordServers(v map[string]any, ids []int, note string) {
	v["servers"] = serverNames(ids)
	if note != "" {
		v["note"] = note
	}
}

// pickServers chooses target's servers (sorted by id). note explains a fallback.
func pickServers(ctx context.Context, c Cluster, t Target, rng *rand.Rand) (ids []int, note string, err error) {
	ss := sortedServers(c)
	if len(ss) == 0 {
		return nil, "", fmt.Errorf("the cluster has no servers")
	}
	all := make([]int, len(ss))
	for i, s := range ss {
		all[i] = s.ID
	}
	pool := all
	if t == TargetMinority || t == TargetMajority {
		pool = voters(ss) // a quorum is counted in votes
	}
	shuffled := append([]int(nil), pool...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var n int
	switch t {
	case TargetOne:
		n = 1
	case TargetLeader:
		if id, ok := c.Leader(ctx); ok {
			if _, known := serverByID(ss, id); known {
				return []int{id}, "", nil
			}
		}
		n, note = 1, "no leader: picked a random server"
	case TargetMinority:
		n = max(1, (len(pool)-1)/2)
	case TargetMajority:
		n = majority(len(pool))
	case TargetAll:
		n = len(all)
	default:
		return nil, "", fmt.Errorf("unknown server target %q (valid: %v)", t, ServerTargets())
	}
	ids = append([]int(nil), shuffled[:n]...)
	sort.Ints(ids)
	return ids, note, nil
}

// pickClient chooses a worker. picked says how: "holder" or "random".
func pickClient(ctx context.Context, c Cluster, t ClientTarget, wait time.Duration, rng *rand.Rand) (cl Client, picked string, err error) {
	switch t {
	case TargetHolder, TargetIdle, TargetWaiter:
		if wait <= 0 {
			wait = DefaultHolderWait
		}
		find, poll := c.Holder, 50*time.Millisecond
		switch t {
		case TargetIdle:
			// Idle moments are short: look often.
			find, poll = c.Idle, 2*time.Millisecond
		case TargetWaiter:
			find, poll = c.Waiter, 2*time.Millisecond
		}
		deadline := time.Now().Add(wait)
		for {
			if h, ok := find(); ok {
				return h, string(t), nil
			}
			if !time.Now().Before(deadline) {
				break
			}
			if !sleepCtx(ctx, poll) {
				return Client{}, "", ctx.Err()
			}
		}
		picked = fmt.Sprintf("random (no %s within %s)", t, wait)
	case TargetRandomClient, "":
		picked = "random"
	default:
		return Client{}, "", fmt.Errorf("unknown client target %q (valid: %v)", t, ClientTargets())
	}
	cs := append([]Client(nil), c.Clients()...)
	if len(cs) == 0 {
		return Client{}, picked, fmt.Errorf("no live workers")
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Slot < cs[j].Slot })
	return cs[rng.IntN(len(cs))], picked, nil
}

// clientValue describes a client fault's target.
func clientValue(name string, t ClientTarget, cl Client, picked string) map[string]any {
	v := map[string]any{"fault": name, "target": string(t)}
	if picked == "" {
		return v
	}
	v["picked"] = picked
	v["process"] = cl.Process
	v["slot"] = cl.Slot
	v["pid"] = cl.Pid
	if cl.SessionID != "" {
		v["session"] = cl.SessionID
	}
	return v
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
