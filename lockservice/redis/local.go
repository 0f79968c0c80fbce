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

// local is one private redis-server on 127.0.0.1, for conformance: the instance of
// the single topology, with the settings' persistence.
type local struct {
	addr string
	proc *lockservice.LocalProcess
	dir  string
}

var _ lockservice.Local = (*local)(nil)

// startLocal writes the instance's redis.conf in cfg.Dir (the one a run's instance
// gets, bound to 127.0.0.1 on a free port) and starts it.
func startLocal(ctx context.Context, cfg lockservice.LocalConfig) (lockservice.Local, error) {
	st := lockservice.LocalSettings(kind.Redis, cfg).(RedisSettings)
	if st.Topology != "" && st.Topology != RedisSingle {
		return nil, fmt.Errorf("redis topology %s: a private server is one instance (other topologies are a run's: zlockcheck run --redis-topology)", st.Topology)
	}
	st.Topology = RedisSingle
	port, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	f := redisFiles{Conf: filepath.Join(cfg.Dir, "redis.conf"), Log: filepath.Join(cfg.Dir, "server.log"),
		Pid: filepath.Join(cfg.Dir, "redis.pid"), Data: filepath.Join(cfg.Dir, "data")}
	if err := os.MkdirAll(f.Data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.Conf, redisConf(st, 1, netip.MustParseAddr("127.0.0.1"), f, netip.Addr{}), 0o644); err != nil {
		return nil, err
	}
	l := &local{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: cfg.Dir}
	// The command line's port wins over the file's.
	l.proc, err = lockservice.StartLocalProcess("private Redis on "+l.addr, []string{"redis-server", f.Conf, "--port", strconv.Itoa(port)}, f.Log)
	if err != nil {
		os.RemoveAll(cfg.Dir)
		return nil, err
	}
	if err := l.proc.WaitServing(ctx, 20*time.Second, l.ping); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// call sends commands over a fresh connection, bounded by OpTimeout.
func (l *local) call(ctx context.Context, cmds ...[]string) ([]any, error) {
	ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", l.addr)
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

func (l *local) ping(ctx context.Context) error {
	out, err := l.call(ctx, []string{"PING"})
	if err != nil {
		return err
	}
	if pong, err := replyString(out[0]); err != nil || pong != "PONG" {
		return fmt.Errorf("PING: %q %v", pong, err)
	}
	return nil
}

func (l *local) Connect() string { return l.addr }

// End runs the lock's keys' TTL out now (PEXPIRE 1 ms), as if the holder had let its
// lease lapse: the keys the acquire named (Holder.Place), and only while they still
// hold the value it wrote, when it said which.
func (l *local) End(ctx context.Context, h lockservice.Holder) (lockservice.Ending, error) {
	keys := h.Place.Keys
	if len(keys) == 0 {
		return lockservice.Ending{}, lockservice.CannotEnd(`the worker's acquire did not say where its lock lives ("lock":{"keys":[...]} on its ok, docs/protocol.md), so its lease cannot be run out`)
	}
	var cmds [][]string
	for _, k := range keys {
		if h.Place.Value != "" {
			cmds = append(cmds, []string{"EVAL", "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], 1) end return 0", "1", k, h.Place.Value})
		} else {
			cmds = append(cmds, []string{"PEXPIRE", k, "1"})
		}
	}
	out, err := l.call(ctx, cmds...)
	if err != nil {
		return lockservice.Ending{}, err
	}
	for i, o := range out {
		if n, err := replyInt(o); err != nil || n != 1 {
			return lockservice.Ending{}, fmt.Errorf("run out key %q: it was not there (with the value the acquire named): %v %v", keys[i], o, err)
		}
	}
	return lockservice.Ending{Did: "ran out the TTL of " + strings.Join(keys, ", ")}, nil
}

func (l *local) Close() error {
	l.proc.Stop(syscall.SIGTERM, 5*time.Second)
	return os.RemoveAll(l.dir)
}
