package nemesis

import (
	"context"
	"fmt"
	"net"
	"time"
)

// ExpireSession expires the ZooKeeper session a worker reported (its "session" event:
// the id as "0x..." and the base64 password) through the server at addr, as the
// session-expire fault does: it attaches to the session and closes it. timeout is the
// session timeout sent when attaching (> 0).
func ExpireSession(ctx context.Context, addr, sessionID, passwd string, timeout time.Duration) error {
	id, err := parseSessionID(sessionID)
	if err != nil {
		return err
	}
	pw, err := parsePasswd(passwd)
	if err != nil {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("expire session %s: want a session timeout > 0, got %s", sessionID, timeout)
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("expire session %s: %w", sessionID, err)
	}
	defer conn.Close()
	if _, err := closeSession(ctx, conn, id, pw, timeout); err != nil {
		return fmt.Errorf("expire session %s: %w", sessionID, err)
	}
	return nil
}
