package sqldb

import (
	"context"
	"net/netip"
	"slices"
	"strconv"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// A database session is a client connection to one server: a PostgreSQL backend,
// named by its pid, or a MariaDB connection, named by its CONNECTION_ID(). The workers
// report it as SessionName of that number. ServerOf and LiveSessions read every
// server's connections (each kind's own query) and look through them alike.

// dbConn is one client connection to a server: its number and its client's address.
type dbConn struct {
	id   uint64
	addr netip.Addr
}

// allConns reads every server's client connections with read, in parallel (none
// for a server that does not answer).
func (d *dbServers) allConns(ctx context.Context, read func(context.Context, *Server) ([]dbConn, error)) [][]dbConn {
	return eachServer(d.Servers, func(s *Server) []dbConn {
		cs, _ := read(ctx, s)
		return cs
	})
}

// serverOf is the server whose connections (all, by server) include session (a
// session's number: "0x<hex>" or decimal), else the first with a connection from
// addr (any when addr is invalid). With idFromAddr, a session's number matches only
// a connection from addr: MariaDB's ids repeat across its independent servers, where
// PostgreSQL's pids are unique on the machine; with idFromAddr and no addr (every
// client masqueraded to one address), only when exactly one server has it.
func (d *dbServers) serverOf(all [][]dbConn, addr netip.Addr, session string, idFromAddr bool) (int, bool) {
	id, hasID := sessionNumber(session)
	if idFromAddr && !addr.IsValid() {
		found := 0
		for i, cs := range all {
			if hasID && slices.ContainsFunc(cs, func(c dbConn) bool { return c.id == id }) {
				if found != 0 {
					return 0, false
				}
				found = d.Servers[i].ID
			}
		}
		return found, found != 0
	}
	for _, byID := range []bool{true, false} {
		if byID && !hasID || !byID && !addr.IsValid() {
			continue
		}
		for i, cs := range all {
			for _, c := range cs {
				fromAddr := !addr.IsValid() || c.addr == addr
				if byID && c.id == id && (fromAddr || !idFromAddr) || !byID && fromAddr {
					return d.Servers[i].ID, true
				}
			}
		}
	}
	return 0, false
}

// liveSessions are the sessions (SessionName of the number) of the connections all.
func liveSessions(all [][]dbConn) map[string]bool {
	alive := map[string]bool{}
	for _, cs := range all {
		for _, c := range cs {
			alive[lockservice.SessionName(c.id)] = true
		}
	}
	return alive
}

// sessionNumber reads a session as the workers report it, "0x<hex>" (SessionName),
// or a plain decimal number; false when it is neither or 0.
func sessionNumber(s string) (uint64, bool) {
	if n, ok := lockservice.ParseSession(s); ok {
		return n, n > 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}
