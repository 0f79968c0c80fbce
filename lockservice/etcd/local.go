package etcd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

func init() { lockservice.RegisterLocal(kind.Etcd, startLocal) }

// local is conformance's private etcd: one member on 127.0.0.1, on free ports, of
// the settings' release.
type local struct {
	dir    string
	addr   string
	proc   *lockservice.LocalProcess
	client *clientv3.Client
}

var _ lockservice.Local = (*local)(nil)

// startLocal writes the member's configuration in cfg.Dir and starts it.
func startLocal(ctx context.Context, cfg lockservice.LocalConfig) (lockservice.Local, error) {
	st := lockservice.LocalSettings(kind.Etcd, cfg).(Settings)
	cache, err := maven.CacheDir(os.Getenv("ZLC_CACHE_DIR"))
	if err != nil {
		return nil, err
	}
	bin, err := binary(st.Version, cache)
	if err != nil {
		return nil, err
	}
	cport, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	pport, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	l := &local{dir: cfg.Dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(cport))}
	urls := []memberURLs{{client: "http://" + l.addr, peer: fmt.Sprintf("http://127.0.0.1:%d", pport)}}
	conf := filepath.Join(cfg.Dir, "etcd.conf.yml")
	if err := os.WriteFile(conf, memberConf(1, urls, filepath.Join(cfg.Dir, "data"), "zlc-local", "for a private server"), 0o644); err != nil {
		return nil, err
	}
	l.proc, err = lockservice.StartLocalProcess("private etcd on "+l.addr, []string{bin, "--config-file", conf}, filepath.Join(cfg.Dir, "server.log"))
	if err != nil {
		return nil, err
	}
	l.client, err = clientv3.New(clientv3.Config{Endpoints: []string{l.addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		err = l.proc.WaitServing(ctx, 20*time.Second, l.serving)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// serving is nil once the member answers a linearizable read.
func (l *local) serving(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
	defer cancel()
	_, err := l.client.Get(ctx, "zlc-serving")
	return err
}

// Connect is the member's client address.
func (l *local) Connect() string { return l.addr }

// End revokes the lease that holds the worker's lock: the one its acquire named
// (lock.session), else the one it reported last as its session. Its keys go at once,
// and its client learns at its next keep-alive, within the session timeout. (A
// library that grants a lease per hold, as etcd3's Lock on npm does, names it in its
// acquire; its session event comes after the acquire's reply.)
func (l *local) End(ctx context.Context, h lockservice.Holder) (lockservice.Ending, error) {
	session := h.Place.Session
	if session == "" {
		session = h.Session
	}
	id, ok := lockservice.ParseSession(session)
	if !ok {
		return lockservice.Ending{}, lockservice.CannotEnd(fmt.Sprintf("the worker's session %q is no lease id (0x<hex>): a session event with the lease its lock's keys are attached to", session))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*lockservice.OpTimeout)
	defer cancel()
	if _, err := l.client.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
		return lockservice.Ending{}, fmt.Errorf("revoke lease %s: %w", session, err)
	}
	return lockservice.Ending{Did: "revoked lease " + session, MustReport: true}, nil
}

// Close stops the member and removes its files.
func (l *local) Close() error {
	if l.client != nil {
		l.client.Close()
	}
	if l.proc != nil {
		l.proc.Stop(syscall.SIGTERM, 5*time.Second)
	}
	return os.RemoveAll(l.dir)
}
