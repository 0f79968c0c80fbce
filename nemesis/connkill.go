package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

var _ fault = (*ConnectionKill)(nil)

// SessionKiller is a lock service whose servers can end a client's session from their
// side (a Redis connection, a PostgreSQL backend, a MariaDB connection).
// ConnectionKill needs it.
type SessionKiller interface {
	// KillSession ends session (the id a worker reported, "0x<hex>") on server and
	// says how many connections it ended (0: the session had already gone); an
	// error when the run's servers cannot.
	KillSession(ctx context.Context, server int, session string) (killed int, err error)
}

// SessionLocks is a Cluster that knows whether ending a session frees the locks it
// holds: a database's session locks do go with it; a lock table's row or a Redis key
// lives on (until its expiry or TTL). Without it, none is taken to.
type SessionLocks interface {
	KillFreesLocks() bool
}

// killFreesLocks reports whether the run's recipe loses its locks with its session
// and the service can end one (SessionKiller, SessionLocks).
func killFreesLocks(c Cluster) bool {
	_, killer := abilityOf[SessionKiller](c)
	sl, ok := c.(SessionLocks)
	return killer && ok && sl.KillFreesLocks()
}

// recordSessionsEnd marks a server fault's value when it ends sessions whose locks go
// with them (a database's session lock, SessionKiller.KillFreesLocks): the cause
// classes read it.
func recordSessionsEnd(c Cluster, v map[string]any) {
	if killFreesLocks(c) {
		v["frees_locks"] = true
	}
}

// ConnectionKill ends a worker's session from the server's side, with the id the
// worker reported as its session ("0x<hex>"): on Redis CLIENT KILL ID of its CLIENT
// ID (the session being the connection: it deletes nothing, the holder's key lives on
// until its TTL, and the client may reconnect with a new CLIENT ID); on PostgreSQL
// pg_terminate_backend of its backend pid and on MariaDB KILL CONNECTION of its
// connection id (both free every lock the session held: the analogue of a ZooKeeper
// session's expiry). The server is the one the servers say the worker is connected to
// (ServerOf), else the primary. The fault is over when applied; Undo has nothing to
// do.
type ConnectionKill struct {
	// Target says which worker.
	Target ClientTarget
	// HolderWait bounds the wait for a lock holder (0: DefaultHolderWait).
	HolderWait time.Duration
}

// Apply closes the target worker's connection.
func (f ConnectionKill) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ConnectionKill) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassConnectionKill), "target": string(f.Target)}
	sk, ok := abilityOf[SessionKiller](c)
	if !ok {
		return plan{value: v}, fmt.Errorf("connection-kill: this run's servers cannot end a client's session")
	}
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v = clientValue(string(ClassConnectionKill), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	session := cl.LockSessionID()
	if _, err := parseSessionID(session); err != nil {
		return plan{value: v}, fmt.Errorf("connection-kill: worker %d reported no session id: %w", cl.Process, err)
	}
	v["session"] = session
	server, ok := c.ServerOf(ctx, cl)
	if !ok {
		if server, ok = c.Leader(ctx); !ok {
			return plan{value: v}, fmt.Errorf("connection-kill: which server worker %d uses is unknown (no server, or more than one, has a client with its session id %s)", cl.Process, session)
		}
	}
	v["server"] = serverName(server)
	if killFreesLocks(c) {
		v["frees_locks"] = true // the cause classes read it: the analogue of session-expire
	}
	apply := func(ctx context.Context) error {
		n, err := sk.KillSession(ctx, server, session)
		if err != nil {
			return fmt.Errorf("connection-kill on s%d: %w", server, err)
		}
		v["killed"] = n // 0: the connection had already gone
		return nil
	}
	return plan{value: v, apply: apply, undo: noUndo}, nil
}
