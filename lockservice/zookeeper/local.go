package zookeeper

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

func init() { lockservice.RegisterLocal(kind.ZooKeeper, startLocal) }

// local is a standalone server started for conformance.
type local struct {
	at
	s   *Standalone
	dir string
}

// startLocal starts a Standalone in cfg.Dir, with the settings' ZooKeeper install
// and tick.
func startLocal(ctx context.Context, cfg lockservice.LocalConfig) (lockservice.Local, error) {
	st := lockservice.LocalSettings(kind.ZooKeeper, cfg).(Settings)
	if st.Observers > 0 {
		return nil, errors.New("observers: a private server is one standalone ZooKeeper, with no observers (they are a run's: zlockcheck run --observers)")
	}
	s, err := StartStandalone(ctx, EnsembleConfig{Dir: cfg.Dir, ZKHome: st.ZKHome, Tick: st.Tick})
	if err != nil {
		os.RemoveAll(cfg.Dir)
		return nil, err
	}
	return &local{at: at{addr: s.Addr, timeout: cfg.SessionTimeout}, s: s, dir: cfg.Dir}, nil
}

func (l *local) Close() error {
	l.s.Stop()
	return os.RemoveAll(l.dir)
}

// At is a server at addr that conformance neither starts nor stops (the wire
// simulator's TCP server, say): a session is ended by taking it over and closing it,
// as on a real ZooKeeper.
func At(addr string, sessionTimeout time.Duration) lockservice.Local {
	return at{addr: addr, timeout: sessionTimeout}
}

type at struct {
	addr    string
	timeout time.Duration
}

var (
	_ lockservice.Local = at{}
	_ lockservice.Local = (*local)(nil)
)

func (a at) Connect() string { return a.addr }

// End expires the holder's session: ZooKeeper's own way of ending a hold.
func (a at) End(ctx context.Context, h lockservice.Holder) (lockservice.Ending, error) {
	if h.Session == "" || h.Passwd == "" {
		return lockservice.Ending{}, lockservice.CannotEnd(`the worker sent no {"event":"session"} with session_id and passwd, so its session cannot be expired (the session-expire fault needs them too)`)
	}
	if err := nemesis.ExpireSession(ctx, a.addr, h.Session, h.Passwd, a.timeout); err != nil {
		return lockservice.Ending{}, err
	}
	return lockservice.Ending{Did: "expired session " + h.Session, MustReport: true}, nil
}

func (a at) Close() error { return nil }
