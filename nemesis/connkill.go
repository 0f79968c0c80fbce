package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

var _ fault = (*ConnectionKill)(nil)

// ConnectionKill closes a worker's connection on the Redis instance it uses, from the
// server's side (CLIENT KILL ID with the CLIENT ID the worker reported as its session,
// "0x<hex>"): the Redis analogue of session-expire for the session's end, the session
// being the connection. Unlike a ZooKeeper session's end it deletes nothing: the
// holder's key lives on until its TTL, and the worker's client may reconnect (with a
// new CLIENT ID). The instance is the one the servers say the worker is connected to
// (ServerOf), else the primary. The fault is over when applied; Undo has nothing to do.
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
	rc, _, err := redisOf(c, ClassConnectionKill)
	if err != nil {
		return plan{value: v}, err
	}
	cl, picked, err := pickClient(ctx, c, f.Target, f.HolderWait, rng)
	v = clientValue(string(ClassConnectionKill), f.Target, cl, picked)
	if err != nil {
		return plan{value: v}, err
	}
	id, err := parseSessionID(cl.SessionID)
	if err != nil {
		return plan{value: v}, fmt.Errorf("connection-kill: worker %d reported no CLIENT ID: %w", cl.Process, err)
	}
	server, ok := c.ServerOf(ctx, cl)
	if !ok {
		if server, ok = c.Leader(ctx); !ok {
			return plan{value: v}, fmt.Errorf("connection-kill: which instance worker %d uses is unknown", cl.Process)
		}
	}
	v["server"] = serverName(server)
	apply := func(ctx context.Context) error {
		n, err := rc.RedisCommand(ctx, server, "CLIENT", "KILL", "ID", strconv.FormatInt(id, 10))
		if err != nil {
			return fmt.Errorf("connection-kill on s%d: %w", server, err)
		}
		v["killed"] = n // 0: the connection had already gone
		return nil
	}
	return plan{value: v, apply: apply, undo: noUndo}, nil
}
