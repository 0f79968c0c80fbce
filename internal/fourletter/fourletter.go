// Package fourletter owns the exchange of one ZooKeeper four-letter word (srvr, cons,
// mntr, wchc, ...) over a connection the caller dialled: the harness, the standalone
// server's readiness check and the test fixture all ask through it.
package fourletter

import (
	"io"
	"net"
	"strings"
	"time"
)

// Timeout bounds one exchange, from the write to the server closing the connection.
const Timeout = 2 * time.Second

// Ask sends word on conn and returns everything the server answers until it closes
// the connection (or Timeout passes: a paused server then gives what it sent, often
// nothing). The error is the write's; a read that ends early is not an error.
func Ask(conn net.Conn, word string) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(Timeout))
	if _, err := conn.Write([]byte(word)); err != nil {
		return "", err
	}
	var b strings.Builder
	_, _ = io.Copy(&b, conn)
	return b.String(), nil
}
