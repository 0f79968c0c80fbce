package redis

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// Redis is a running set of Redis instances, each in its own namespace of the run's
// network (server N at ServerAddr(N), port 6379), started fresh for the run.
type Redis struct {
	lockservice.InNamespaces
	cfg RedisConfig
	// Instances are the redis-servers, by number from 1 (instance 1 is the
	// replicas' primary), each with its redis.conf (Conf), log, pid file and data
	// directory in its Dir.
	Instances []*lockservice.Member
	// SentinelNodes are the redis-sentinels of the sentinel topology, sentinel N beside
	// instance N, in its namespace and directory (sentinel.conf, sentinel.log).
	SentinelNodes []*lockservice.Member
	// external: an existing Redis (ConnectRedis), not the tool's to manage.
	external bool
	// remote holds the instances on SSH nodes (StartRemoteRedis), nil in namespaces.
	remote *lockservice.Remote
	// lockKey is the run's lock key (SetLockKey), nil until the run names it.
	lockKey atomic.Pointer[string]
}

var _ lockservice.Service = (*Redis)(nil)

// StartRedis creates a namespace per instance on net, writes each instance's
// redis.conf and starts them, then waits until every one serves (the replicas linked
// to their primary); the sentinel topology then starts the sentinels and waits until
// they agree, and the cluster topology forms the cluster and waits until it is
// whole. On error the Redis returned, if not nil, holds what was started so far:
// Close it.
func StartRedis(ctx context.Context, net *netns.Network, cfg RedisConfig) (*Redis, error) {
	cfg.defaults()
	if err := cfg.validateNodes(cfg.Nodes); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("redis: %s not found (%v): install Debian's redis-server and redis-tools (make setup)", cfg.Binary, err)
	}
	cfg.Binary = bin
	r := &Redis{InNamespaces: lockservice.InNamespaces{Net: net}, cfg: cfg}
	for id := 1; id <= cfg.Nodes; id++ {
		in, err := r.addInstance(ctx, id)
		if err != nil {
			return r, err
		}
		r.Instances = append(r.Instances, in)
	}
	for _, in := range r.Instances {
		if err := in.Host.Start(ctx); err != nil {
			return r, fmt.Errorf("redis instance %d: %w", in.ID, err)
		}
	}
	if cfg.Topology == RedisCluster {
		// Each instance alone answers, but serves no slot until the cluster forms.
		if err := r.waitInstances(ctx, cfg.StartTimeout, "redis not serving", "not every instance answers", r.ping); err != nil {
			return r, err
		}
		if err := r.formCluster(ctx); err != nil {
			return r, err
		}
		return r, r.WaitClusterFormed(ctx, cfg.StartTimeout)
	}
	if err := r.WaitServing(ctx, cfg.StartTimeout); err != nil || cfg.Topology != RedisSentinel {
		return r, err
	}
	if err := r.startSentinels(ctx); err != nil {
		return r, err
	}
	return r, r.WaitFormed(ctx, cfg.StartTimeout)
}

// addInstance makes instance id's namespace on the network and writes its files.
func (r *Redis) addInstance(ctx context.Context, id int) (*lockservice.Member, error) {
	ns, err := r.Net.AddHost(ctx, fmt.Sprintf("s%d", id), lockservice.ServerAddr(id))
	if err != nil {
		return nil, err
	}
	// Absolute: Redis reads its configuration in order, and its dir directive
	// changes its working directory before the logfile and pidfile lines are read.
	dir, err := filepath.Abs(filepath.Join(r.cfg.Dir, ns.Name))
	if err != nil {
		return nil, err
	}
	in := &lockservice.Member{ID: id, Port: redisPort, Dir: dir}
	f := redisFiles{Conf: filepath.Join(in.Dir, "redis.conf"), Log: filepath.Join(in.Dir, "server.log"),
		Pid: filepath.Join(in.Dir, "redis.pid"), Data: filepath.Join(in.Dir, "data"), Nodes: filepath.Join(in.Dir, "nodes.conf")}
	in.Conf, in.Log = f.Conf, f.Log
	if err := os.MkdirAll(f.Data, 0o755); err != nil {
		return nil, err
	}
	var primary netip.Addr
	if r.cfg.Topology.replicated() && id > 1 {
		primary = lockservice.ServerAddr(1)
	}
	if err := os.WriteFile(f.Conf, redisConf(r.cfg.RedisSettings, id, lockservice.ServerAddr(id), f, primary), 0o644); err != nil {
		return nil, err
	}
	in.Host = lockservice.NewNSHost(id, ns, []string{r.cfg.Binary, f.Conf}, f.Log)
	return in, nil
}

// Settings are the instances' topology and persistence.
func (r *Redis) Settings() RedisSettings { return r.cfg.RedisSettings }

// Connect is every instance's address, host:6379,..., instance 1 (the primary) first.
func (r *Redis) Connect() string {
	return strings.Join(lockservice.ClientAddrs(r.Instances), ",")
}

// Nodes are the instances as the nemesis addresses them.
func (r *Redis) Nodes() []nemesis.Server {
	return lockservice.Nodes(r.Instances)
}

// call sends commands to an instance over a fresh connection, bounded by opTimeout,
// and returns their replies (an error reply is a respError among them).
func (r *Redis) call(ctx context.Context, in *lockservice.Member, cmds ...[]string) ([]any, error) {
	conn, err := r.Dial(ctx, in.ClientAddr(), lockservice.OpTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline := time.Now().Add(lockservice.OpTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if pw := redisopt.Password(); pw != "" {
		out, err := newRespConn(conn).pipeline(append([][]string{{"AUTH", pw}}, cmds...)...)
		if err != nil {
			return nil, err
		}
		if e, ok := out[0].(respError); ok {
			return nil, fmt.Errorf("AUTH (the password in %s): %w", redisopt.PasswordVar, e)
		}
		return out[1:], nil
	}
	return newRespConn(conn).pipeline(cmds...)
}

// do sends one command to an instance; an error reply is the error.
func (r *Redis) do(ctx context.Context, in *lockservice.Member, args ...string) (any, error) {
	out, err := r.call(ctx, in, args)
	if err != nil {
		return nil, err
	}
	if e, ok := out[0].(respError); ok {
		return nil, e
	}
	return out[0], nil
}

// info is one section of an instance's INFO as key:value pairs.
func (r *Redis) info(ctx context.Context, in *lockservice.Member, section string) (map[string]string, error) {
	v, err := r.do(ctx, in, "INFO", section)
	if err != nil {
		return nil, err
	}
	text, err := replyString(v)
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

// parseInfo reads INFO's key:value lines (comments and blank lines skipped).
func parseInfo(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// Version is what the first instance that answers says it runs (INFO server's
// redis_version), "" when none answers.
func (r *Redis) Version(ctx context.Context) string {
	for _, in := range r.Instances {
		if m, err := r.info(ctx, in, "server"); err == nil && m["redis_version"] != "" {
			return m["redis_version"]
		}
	}
	return ""
}

// Leader is the primary: for replicas the instance that reports role:master (the
// lowest id if several do), for a single instance instance 1; under sentinels the
// instance they name, what their clients use (an isolated old primary may still
// report role:master); in a cluster the primary that serves the run's lock key
// (SetLockKey; none before); RedLock's independent instances have none.
func (r *Redis) Leader(ctx context.Context) (int, bool) {
	switch r.cfg.Topology {
	case RedisSingle:
		return 1, true
	case RedisCluster:
		return r.clusterLeader(ctx)
	case RedisSentinel:
		if addr, err := r.SentinelPrimary(ctx); err == nil {
			if i := slices.IndexFunc(r.Instances, func(in *lockservice.Member) bool { return in.ClientAddr() == addr }); i >= 0 {
				return r.Instances[i].ID, true
			}
		}
		return 0, false
	case RedisReplicas:
		for _, in := range r.Instances {
			if m, err := r.info(ctx, in, "replication"); err == nil && m["role"] == "master" {
				return in.ID, true
			}
		}
	}
	return 0, false
}

// Close kills every instance and waits until each one's processes (a child forked
// for a sync or a rewrite too) are gone. The instances' files stay in the run
// directory.
func (r *Redis) Close() error {
	if r.remote != nil {
		return r.closeRemote()
	}
	var pgids []int
	for _, in := range append(slices.Clone(r.SentinelNodes), r.Instances...) {
		if pid := in.Host.Pid(); pid > 0 {
			pgids = append(pgids, pid)
		}
		_ = in.Host.Kill(context.Background())
	}
	var errs []error
	for _, pgid := range pgids {
		errs = append(errs, waitGroupGone(pgid, 5*time.Second))
	}
	return errors.Join(errs...)
}

// waitGroupGone waits until process group pgid has no process left, killing what
// is left of it.
func waitGroupGone(pgid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for syscall.Kill(-pgid, 0) == nil {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if time.Now().After(deadline) {
			return fmt.Errorf("redis: process group %d outlived SIGKILL for %s", pgid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// ping is nil when instance in answers PING.
func (r *Redis) ping(ctx context.Context, in *lockservice.Member) error {
	v, err := r.do(ctx, in, "PING")
	if err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	if pong, err := replyString(v); err != nil || pong != "PONG" {
		return fmt.Errorf("PING: answered %v", v)
	}
	return nil
}

// serving is nil when instance in answers PING and, as a replica, is linked; in a
// cluster, when the cluster is ok in its eyes too.
func (r *Redis) serving(ctx context.Context, in *lockservice.Member) error {
	cmds := [][]string{{"PING"}}
	// Under sentinels, or in a cluster, any instance may be a primary now: each
	// says its role.
	sentinels, cluster := r.cfg.Topology == RedisSentinel, r.cfg.Topology == RedisCluster
	replica := r.cfg.Topology.replicated() && in.ID > 1
	if replica || sentinels || cluster {
		cmds = append(cmds, []string{"INFO", "replication"})
	}
	out, err := r.call(ctx, in, cmds...)
	if err != nil {
		return err
	}
	pong, err := replyString(out[0])
	switch {
	case err != nil:
		return fmt.Errorf("PING: %w", err)
	case pong != "PONG":
		return fmt.Errorf("PING: answered %q", pong)
	}
	if !replica && !sentinels && !cluster {
		return nil
	}
	text, err := replyString(out[1])
	if err != nil {
		return err
	}
	m := parseInfo(text)
	if sentinels {
		return r.servingUnderSentinels(ctx, in, m)
	}
	if cluster {
		return r.servingInCluster(ctx, in, m)
	}
	if m["master_link_status"] != "up" {
		return fmt.Errorf("replica of %s: link %s", r.Instances[0].ClientAddr(), m["master_link_status"])
	}
	return nil
}

// servingUnderSentinels is nil when instance in, whose INFO replication is m, is the
// primary the sentinels name or a replica linked to its primary (a killed primary
// comes back as a primary of its own until the sentinels make it a replica).
func (r *Redis) servingUnderSentinels(ctx context.Context, in *lockservice.Member, m map[string]string) error {
	if m["role"] != "master" {
		if m["master_link_status"] != "up" {
			return fmt.Errorf("replica of %s:%s: link %s", m["master_host"], m["master_port"], m["master_link_status"])
		}
		return nil
	}
	if len(r.SentinelNodes) == 0 {
		// Before the sentinels start: instance 1 is the primary the files name.
		if in.ID != 1 {
			return fmt.Errorf("a primary, but its redis.conf makes it a replica of instance 1")
		}
		return nil
	}
	primary, err := r.SentinelPrimary(ctx)
	switch {
	case err != nil:
		return err
	case primary != in.ClientAddr():
		return fmt.Errorf("a primary, while the sentinels name %s (not yet made its replica)", primary)
	}
	return nil
}

// WaitServing waits until every instance serves (a replica: linked to its primary).
// An instance that exited, or the timeout, is an error naming each instance that does
// not serve, why, and the tail of its log.
func (r *Redis) WaitServing(ctx context.Context, timeout time.Duration) error {
	return r.waitInstances(ctx, timeout, "redis not serving", "not every instance serves", r.serving)
}

// waitInstances waits until check passes on every instance, looking every 50 ms.
// An instance that exited, or the timeout, is an error that begins with title
// (saying notWithin at the timeout) and names each instance check refuses, why,
// and the tail of its log.
func (r *Redis) waitInstances(ctx context.Context, timeout time.Duration, title, notWithin string, check func(context.Context, *lockservice.Member) error) error {
	checks := make([]lockservice.ServerCheck, len(r.Instances))
	for i, in := range r.Instances {
		checks[i] = in.Check("instance", func(ctx context.Context) error { return check(ctx, in) })
	}
	return lockservice.WaitServing(ctx, timeout, 50*time.Millisecond, title, notWithin, func() lockservice.ServingPoll {
		return lockservice.Poll(ctx, checks)
	})
}

// Command sends one command to instance id (from 1) over a fresh connection from the
// harness, bounded by opTimeout, and returns its reply; an error reply is the error.
// The nemesis's Redis faults (promotion, the clock-jump script) go through it.
func (r *Redis) Command(ctx context.Context, id int, args ...string) (any, error) {
	if id < 1 || id > len(r.Instances) {
		return nil, fmt.Errorf("redis: no instance %d (1..%d)", id, len(r.Instances))
	}
	return r.do(ctx, r.Instances[id-1], args...)
}

// The abilities the nemesis asks a run's service for, which Redis has.
var (
	_ nemesis.RedisAdmin    = (*Redis)(nil)
	_ nemesis.SessionKiller = (*Redis)(nil)
)

// RedisSettings are the instances' topology and persistence (nemesis.RedisAdmin).
func (r *Redis) RedisSettings() (topology, persistence string, ok bool) {
	s := r.Settings().WithDefaults()
	return string(s.Topology), string(s.Persistence), true
}
