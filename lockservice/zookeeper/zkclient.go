package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// Client opens a go-zookeeper session from the harness's namespace.
func (e *Ensemble) Client(ctx context.Context, sessionTimeout time.Duration) (*zk.Conn, error) {
	dialer := func(_, addr string, timeout time.Duration) (net.Conn, error) {
		return e.Dial(ctx, addr, timeout)
	}
	return plainSession(strings.Split(e.Connect(), ","), sessionTimeout, dialer, quietLogger{})
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// LiveSessions asks the leader (dump) which sessions have ephemeral nodes.
func (e *Ensemble) LiveSessions(ctx context.Context) map[string]bool {
	alive := map[string]bool{}
	leader := e.LeaderServer(ctx)
	if leader == nil {
		return alive
	}
	text, err := e.fourLetter(ctx, leader, "dump")
	if err != nil {
		return alive
	}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "0x") {
			alive[strings.Fields(line)[0]] = true
		}
	}
	return alive
}

// WaitSession waits until a session is established, then drains the events.
func WaitSession(events <-chan zk.Event, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return nil
			}
		case <-timer.C:
			return fmt.Errorf("no session within %s", limit)
		}
	}
}

// zkLock is a LockReader over a go-zookeeper session.
type zkLock struct{ conn *zk.Conn }

var _ lockservice.LockReader = zkLock{}

// OpenLock opens a session to read a lock's entries.
func (e *Ensemble) OpenLock(ctx context.Context, sessionTimeout time.Duration) (lockservice.LockReader, error) {
	conn, err := e.Client(ctx, sessionTimeout)
	if err != nil {
		return nil, err
	}
	return zkLock{conn: conn}, nil
}

func (l zkLock) Entries(lock lockservice.Lock, fresh bool) ([]string, error) {
	lockPath := lock.Path
	if fresh {
		if _, err := l.conn.Sync(lockPath); err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return nil, nil
			}
			return nil, err
		}
	}
	names, _, err := l.conn.Children(lockPath)
	if errors.Is(err, zk.ErrNoNode) && fresh {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", lockPath, err)
	}
	sort.Slice(names, func(i, j int) bool { return SeqOf(names[i]) < SeqOf(names[j]) })
	return names, nil
}

func (l zkLock) Owner(lock lockservice.Lock, name string) (string, bool, error) {
	lockPath := lock.Path
	ok, st, err := l.conn.Exists(lockPath + "/" + name)
	if err != nil || !ok || st == nil {
		return "", false, err
	}
	return fmt.Sprintf("0x%x", uint64(st.EphemeralOwner)), true, nil
}

func (l zkLock) Close() { l.conn.Close() }

// SeqOf is the sequence number at the end of a sequential node's name (0 if none).
func SeqOf(node string) int {
	i := len(node)
	for i > 0 && node[i-1] >= '0' && node[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(node[i:])
	return n
}

// MakeCounter creates the counter znode at path holding 0, with its parents.
func (e *Ensemble) MakeCounter(ctx context.Context, sessionTimeout time.Duration, path string) error {
	conn, err := e.Client(ctx, sessionTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		data := []byte{}
		if p == path {
			data = []byte("0")
		}
		if _, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// ReadCounter reads the counter znode at path.
func (e *Ensemble) ReadCounter(ctx context.Context, sessionTimeout time.Duration, path string) (int64, error) {
	conn, err := e.Client(ctx, sessionTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	data, _, err := conn.Get(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", data)
	}
	return n, nil
}
