package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// The sentinel topology: instance 1 a primary and the others its replicas, as the
// replicas topology has them, and beside each instance, in its namespace, a
// redis-sentinel (Debian's redis-sentinel package) that watches the primary under
// the name SentinelMaster. When a majority of them have found it down for
// DownAfter, they elect one of themselves, which promotes a replica and points
// the others at it: the run performs no failover, the sentinels do, as in the
// deployments teams run (a sentinel on each of three hosts beside its Redis).

// SentinelMaster is the name the sentinels know the primary by (what a client's
// Sentinel mode asks them for: SENTINEL get-master-addr-by-name).
const SentinelMaster = "zlc-primary"

// sentinelPort is every sentinel's port (Redis Sentinel's own default).
const sentinelPort = 26379

// SentinelSettings are the sentinels' settings and the replication guards of the
// instances they watch, as config.json records them (zero: withDefaults').
type SentinelSettings struct {
	// DownAfter is how long a sentinel waits for the primary's answer before it
	// finds it down (down-after-milliseconds).
	DownAfter time.Duration `json:"down_after_ns,omitempty"`
	// FailoverTimeout bounds a failover, and is how long the sentinels wait before
	// they try the same primary again (failover-timeout).
	FailoverTimeout time.Duration `json:"failover_timeout_ns,omitempty"`
}

// The sentinel settings' defaults: a primary is found down after a second, and a
// failover is bounded by five (Redis's are 30 s and 3 min; a run is seconds long).
const (
	defaultDownAfter       = time.Second
	defaultFailoverTimeout = 5 * time.Second
)

// withDefaults fills what is unset.
func (g SentinelSettings) withDefaults() SentinelSettings {
	if g.DownAfter == 0 {
		g.DownAfter = defaultDownAfter
	}
	if g.FailoverTimeout == 0 {
		g.FailoverTimeout = defaultFailoverTimeout
	}
	return g
}

// validate names the setting that cannot be.
func (g SentinelSettings) validate() error {
	switch {
	case g.DownAfter < 0 || (g.DownAfter > 0 && g.DownAfter < 100*time.Millisecond):
		return fmt.Errorf("redis-down-after: want at least 100ms, got %s", g.DownAfter)
	case g.FailoverTimeout < 0 || (g.FailoverTimeout > 0 && g.FailoverTimeout < time.Second):
		return fmt.Errorf("redis-failover-timeout: want at least 1s, got %s", g.FailoverTimeout)
	}
	return nil
}

// sentinelFits refuses what the sentinel topology cannot run yet: an existing
// deployment or SSH nodes, and a recipe of the catalogue whose client cannot find
// the primary through sentinels (its own recipe's worker says so at init).
func sentinelFits(p lockservice.Plan) error {
	switch {
	case p.Connect != "":
		return errors.New("redis-topology sentinel: zlockcheck starts the sentinels itself; an existing Sentinel deployment (--connect) is not supported yet")
	case p.SSH != nil:
		return errors.New("redis-topology sentinel: not on --ssh-nodes yet (the sentinels run beside the instances in the run's namespaces)")
	case p.Catalogued && !p.Sentinel:
		return fmt.Errorf("recipe %s has no Sentinel mode here: on --redis-topology sentinel run a catalogue lock on one primary whose client finds it through sentinels (docs/redis.md lists them: the Go, Python, Redisson, Spring and Node ones), or your own (exec)", p.Recipe)
	}
	return nil
}

// quorum is how many of n sentinels must find the primary down: a majority.
func quorum(n int) int { return n/2 + 1 }

// sentinelConf is the sentinel.conf of sentinel id (beside instance id, on addr) of
// n, watching the primary at primary, with its files in dir. Sentinel rewrites the
// file as it learns (replicas, other sentinels, a new primary): the tool's marker
// line stays at its head, where cleanup looks for it.
func sentinelConf(g SentinelSettings, id, n int, addr, primary netip.Addr, dir string) []byte {
	g = g.withDefaults()
	lines := []string{
		fmt.Sprintf("%s: Redis Sentinel %d of %d, beside instance %d", redisMarker, id, n, id),
		"port " + strconv.Itoa(sentinelPort),
		"bind " + addr.String(),
		"protected-mode no",
		"daemonize no",
		"dir " + quoteConf(dir),
		"logfile " + quoteConf(filepath.Join(dir, "sentinel.log")),
		"pidfile " + quoteConf(filepath.Join(dir, "sentinel.pid")),
		`proc-title-template "{title} {listen-addr} {server-mode} {config-file}"`,
		"sentinel resolve-hostnames no",
		fmt.Sprintf("sentinel monitor %s %s %d %d", SentinelMaster, primary, redisPort, quorum(n)),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, g.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", SentinelMaster, g.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// startSentinels writes each instance's sentinel.conf in its directory and starts a
// redis-sentinel beside it, in its namespace; the sentinels join r.SentinelNodes as they
// start. WaitFormed says when they agree.
func (r *Redis) startSentinels(ctx context.Context) error {
	bin, err := exec.LookPath(r.cfg.SentinelBinary)
	if err != nil {
		return fmt.Errorf("redis: %s not found (%v): install Debian's redis-sentinel (make setup)", r.cfg.SentinelBinary, err)
	}
	n := len(r.Instances)
	for _, in := range r.Instances {
		host, ok := in.Host.(*lockservice.NSHost)
		if !ok {
			return fmt.Errorf("redis sentinel %d: its instance is not in a namespace of the run", in.ID)
		}
		conf := filepath.Join(in.Dir, "sentinel.conf")
		if err := os.WriteFile(conf, sentinelConf(r.cfg.Sentinel, in.ID, n, host.Addr(), lockservice.ServerAddr(1), in.Dir), 0o644); err != nil {
			return err
		}
		s := &lockservice.Member{ID: in.ID, Port: sentinelPort, Dir: in.Dir, Conf: conf, Log: filepath.Join(in.Dir, "sentinel.log")}
		s.Host = lockservice.NewNSHost(in.ID, host.NS(), []string{bin, conf}, s.Log)
		if err := s.Host.Start(ctx); err != nil {
			return fmt.Errorf("redis sentinel %d: %w", in.ID, err)
		}
		r.SentinelNodes = append(r.SentinelNodes, s)
	}
	return nil
}

// formed is nil when sentinel s knows the primary, every replica and every other
// sentinel, and finds a quorum able to fail over (SENTINEL CKQUORUM); otherwise it
// says what it waits for.
func (r *Redis) formed(ctx context.Context, s *lockservice.Member) error {
	out, err := r.call(ctx, s, []string{"SENTINEL", "CKQUORUM", SentinelMaster}, []string{"SENTINEL", "MASTER", SentinelMaster})
	if err != nil {
		return err
	}
	if _, err := replyString(out[0]); err != nil {
		return fmt.Errorf("SENTINEL CKQUORUM %s: %w", SentinelMaster, err)
	}
	m, err := replyFields(out[1])
	if err != nil {
		return fmt.Errorf("SENTINEL MASTER %s: %w", SentinelMaster, err)
	}
	n := len(r.Instances)
	switch {
	case m["num-slaves"] != strconv.Itoa(n-1):
		return fmt.Errorf("knows %s of the primary's %d replicas", m["num-slaves"], n-1)
	case m["num-other-sentinels"] != strconv.Itoa(n-1):
		return fmt.Errorf("knows %s of the %d other sentinels", m["num-other-sentinels"], n-1)
	}
	return nil
}

// WaitFormed waits until every sentinel knows the primary, its replicas and the
// other sentinels, with a quorum to fail over. A sentinel that exited, or the
// timeout, is an error naming each sentinel that is not ready and what it waits
// for, with the tail of its log.
func (r *Redis) WaitFormed(ctx context.Context, timeout time.Duration) error {
	checks := make([]lockservice.ServerCheck, len(r.SentinelNodes))
	for i, s := range r.SentinelNodes {
		checks[i] = s.Check("sentinel", func(ctx context.Context) error { return r.formed(ctx, s) })
	}
	return lockservice.WaitServing(ctx, timeout, 100*time.Millisecond, "redis sentinels not formed", "not every sentinel agrees on the primary, its replicas and the other sentinels", func() lockservice.ServingPoll {
		return lockservice.Poll(ctx, checks)
	})
}

// Sentinels are the sentinels' addresses, comma-separated, and the name they know
// the primary by, for the workers' init (connect, sentinel_master); "" and "" on
// another topology.
func (r *Redis) Sentinels() (connect, master string) {
	if r.cfg.Topology != RedisSentinel || len(r.SentinelNodes) == 0 {
		return "", ""
	}
	return strings.Join(lockservice.ClientAddrs(r.SentinelNodes), ","), SentinelMaster
}

// SentinelPrimary is the primary's address as the first sentinel that answers
// names it (SENTINEL get-master-addr-by-name), what a client's Sentinel mode
// connects to.
func (r *Redis) SentinelPrimary(ctx context.Context) (string, error) {
	var errs []string
	for _, s := range r.SentinelNodes {
		out, err := r.call(ctx, s, []string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster})
		if err == nil {
			var hp []any
			if hp, err = replyArray(out[0]); err == nil && len(hp) == 2 {
				host, _ := replyString(hp[0])
				port, _ := replyString(hp[1])
				return net.JoinHostPort(host, port), nil
			}
			if err == nil {
				err = fmt.Errorf("answered %v", out[0])
			}
		}
		errs = append(errs, fmt.Sprintf("sentinel %d: %v", s.ID, err))
	}
	return "", fmt.Errorf("no sentinel names the primary: %s", strings.Join(errs, "; "))
}
