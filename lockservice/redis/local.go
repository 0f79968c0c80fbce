package redis

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func init() { lockservice.RegisterLocal(kind.Redis, startLocal) }

// local is the private redis-servers on 127.0.0.1 of conformance: the one
// instance of the single topology, or RedLock's independent instances (the
// settings' topology redlock: DefaultNodes of them), with the settings'
// persistence.
type local struct {
	instances []*localInstance
	dir       string
}

// localInstance is one redis-server of a local.
type localInstance struct {
	addr string
	proc *lockservice.LocalProcess
}

var _ lockservice.Local = (*local)(nil)

// startLocal writes each instance's redis.conf in its directory under cfg.Dir (the
// one a run's instance gets, bound to 127.0.0.1 on a free port) and starts it.
func startLocal(ctx context.Context, cfg lockservice.LocalConfig) (lockservice.Local, error) {
	st := lockservice.LocalSettings(kind.Redis, cfg).(RedisSettings).WithDefaults()
	if st.Topology.replicated() || st.Topology == RedisCluster {
		return nil, fmt.Errorf("redis topology %s: private servers are one instance, or RedLock's independent ones (a primary with replicas, or a cluster, is a run's: zlockcheck run --redis-topology)", st.Topology)
	}
	l := &local{dir: cfg.Dir}
	for id := 1; id <= st.DefaultNodes(); id++ {
		in, err := startLocalInstance(ctx, st, id, filepath.Join(cfg.Dir, fmt.Sprintf("s%d", id)))
		if in != nil {
			l.instances = append(l.instances, in)
		}
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// startLocalInstance starts instance id in dir and waits until it answers PING.
func startLocalInstance(ctx context.Context, st RedisSettings, id int, dir string) (*localInstance, error) {
	port, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	f := redisFiles{Conf: filepath.Join(dir, "redis.conf"), Log: filepath.Join(dir, "server.log"),
		Pid: filepath.Join(dir, "redis.pid"), Data: filepath.Join(dir, "data")}
	if err := os.MkdirAll(f.Data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.Conf, redisConf(st, id, netip.MustParseAddr("127.0.0.1"), f, netip.Addr{}), 0o644); err != nil {
		return nil, err
	}
	in := &localInstance{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	// The command line's port wins over the file's.
	in.proc, err = lockservice.StartLocalProcess("private Redis on "+in.addr, []string{"redis-server", f.Conf, "--port", strconv.Itoa(port)}, f.Log)
	if err != nil {
		return nil, err
	}
	return in, in.proc.WaitServing(ctx, 20*time.Second, in.ping)
}

// call sends commands over a fresh connection, bounded by OpTimeout.
func (in *localInstance) call(ctx context.Context, cmds ...[]string) ([]any, error) {
	ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", in.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	return newRespConn(conn).pipeline(cmds...)
}

func (in *localInstance) ping(ctx context.Context) error {
	out, err := in.call(ctx, []string{"PING"})
	if err != nil {
		return err
	}
	if pong, err := replyString(out[0]); err != nil || pong != "PONG" {
		return fmt.Errorf("PING: %q %v", pong, err)
	}
	return nil
}

// Connect is every instance's address, comma-separated, as a run's.
func (l *local) Connect() string {
	addrs := make([]string, len(l.instances))
	for i, in := range l.instances {
		addrs[i] = in.addr
	}
	return strings.Join(addrs, ",")
}

// endScript runs key KEYS[1]'s TTL out while it holds value ARGV[1]: a string's
// value, or a field of a hash (Redisson's layout; lockValueScript).
const endScript = `local t = redis.call('TYPE', KEYS[1]).ok
if (t == 'string' and redis.call('GET', KEYS[1]) == ARGV[1]) or (t == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1) then
  return redis.call('PEXPIRE', KEYS[1], 1)
end
return 0`

// End runs the lock's keys' TTL out now (PEXPIRE 1 ms) on every instance, as if the
// holder had let its lease lapse: the keys the acquire named (Holder.Place), and
// only where they still hold the value it wrote, when it said which. At least one
// instance must have held them.
func (l *local) End(ctx context.Context, h lockservice.Holder) (lockservice.Ending, error) {
	keys := h.Place.Keys
	if len(keys) == 0 {
		return lockservice.Ending{}, lockservice.CannotEnd(`the worker's acquire did not say where its lock lives ("lock":{"keys":[...]} on its ok, docs/protocol.md), so its lease cannot be run out`)
	}
	var cmds [][]string
	for _, k := range keys {
		if h.Place.Value != "" {
			cmds = append(cmds, []string{"EVAL", endScript, "1", k, h.Place.Value})
		} else {
			cmds = append(cmds, []string{"PEXPIRE", k, "1"})
		}
	}
	held := 0
	for _, in := range l.instances {
		out, err := in.call(ctx, cmds...)
		if err != nil {
			return lockservice.Ending{}, fmt.Errorf("%s: %w", in.addr, err)
		}
		for _, o := range out {
			if n, err := replyInt(o); err == nil && n == 1 {
				held++
			}
		}
	}
	if held == 0 {
		return lockservice.Ending{}, fmt.Errorf("run out %s: no instance held them (with the value the acquire named)", strings.Join(keys, ", "))
	}
	return lockservice.Ending{Did: "ran out the TTL of " + strings.Join(keys, ", ")}, nil
}

func (l *local) Close() error {
	for _, in := range l.instances {
		in.proc.Stop(syscall.SIGTERM, 5*time.Second)
	}
	return os.RemoveAll(l.dir)
}
