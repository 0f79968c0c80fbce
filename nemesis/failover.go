package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Failover is what an asynchronous primary-replica failover does to a lock granted
// just before it. On a database with a streaming standby (StandbyPromoter), see
// standbyPlan. On Redis's replicas topology: the promoted replica never saw the
// grant, and the clients go on with the promoted replica's data. The workers connect to
// the primary's address only (no Sentinel), so the fault brings the promoted data to
// that address rather than the workers to the promoted replica:
//
//  1. split: a replica, picked at random, is promoted (REPLICAOF NO ONE): from now on
//     it sees none of the primary's writes;
//  2. grant: it waits (up to HolderWait) for a lock granted after the split: a holder
//     other than the one holding at the split, or any holder if none held then;
//  3. demote: the primary becomes a replica of the promoted one (REPLICAOF host port);
//     its offset is past the promoted replica's, so it resyncs in full and its data,
//     the grant's key with it, is replaced by the promoted replica's; it waits until
//     the link is up (the data replaced);
//  4. back: the primary is promoted again (REPLICAOF NO ONE) and the promoted replica
//     follows it (REPLICAOF primary): the workers' primary now serves data that never
//     saw the grant.
//
// Steps 3-4 take some tens of milliseconds (recorded as readonly_ms), during which
// the workers' writes get READONLY (a certain refusal). The fault is over when applied; Undo (idempotent) makes the
// original primary a primary again and the promoted replica its replica, so that a
// partial apply leaves the topology as it was. What it does not emulate: the window a
// real failover leaves (Sentinel's down-after-milliseconds, clients finding the new
// primary) and the old primary's clients writing on meanwhile. The record names the
// primary, the promoted replica and the holder whose grant was lost (apply adds it).
type Failover struct {
	// HolderWait bounds step 2 (0: DefaultHolderWait); with no new grant by then the
	// fault goes on and says so.
	HolderWait time.Duration
}

// Apply does the failover.
func (f Failover) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Failover) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassFailover)}
	if sp, ok := abilityOf[StandbyPromoter](c); ok && sp.HasStandby() {
		return f.standbyPlan(ctx, c, sp, v)
	}
	rc, topology, err := redisOf(c, ClassFailover)
	if err != nil {
		return plan{value: v}, err
	}
	if topology != "replicas" {
		return plan{value: v}, fmt.Errorf("failover: needs Redis's replicas topology (a primary with replicas), not %s", topology)
	}
	ss := sortedServers(c)
	primaryID, ok := c.Leader(ctx)
	primary, known := serverByID(ss, primaryID)
	if !ok || !known || len(ss) < 2 {
		return plan{value: v}, fmt.Errorf("failover: no primary (role:master) among %d instances", len(ss))
	}
	var replicas []Server
	for _, s := range ss {
		if s.ID != primary.ID {
			replicas = append(replicas, s)
		}
	}
	promoted := replicas[rng.IntN(len(replicas))]
	v["primary"], v["promoted"] = serverName(primary.ID), serverName(promoted.ID)
	v["persistence"] = redisPersistence(c)
	fo := failover{c: c, rc: rc, primary: primary, promoted: promoted, wait: f.HolderWait, value: v}
	return plan{value: v, apply: fo.apply, undo: fo.undo}, nil
}

// failover is one Failover's resolved targets.
type failover struct {
	c                 Cluster
	rc                RedisAdmin
	primary, promoted Server
	wait              time.Duration
	value             map[string]any
}

func (fo failover) apply(ctx context.Context) error {
	if _, err := fo.rc.Command(ctx, fo.promoted.ID, "REPLICAOF", "NO", "ONE"); err != nil {
		return fmt.Errorf("failover: promote s%d: %w", fo.promoted.ID, err)
	}
	h, ok := fo.newGrant(ctx)
	if err := ctx.Err(); err != nil {
		return err // the run is ending: Undo puts the roles back
	}
	if ok {
		fo.value["holder"] = h.Process
	} else {
		fo.value["note"] = fmt.Sprintf("no lock granted within %s of the split", fo.holderWait())
	}
	host, port := redisAddr(fo.promoted)
	demoted := time.Now()
	defer func() { fo.value["readonly_ms"] = time.Since(demoted).Milliseconds() }()
	if _, err := fo.rc.Command(ctx, fo.primary.ID, "REPLICAOF", host, port); err != nil {
		return fmt.Errorf("failover: demote s%d: %w", fo.primary.ID, err)
	}
	if err := waitRedis(ctx, fo.rc, fo.primary.ID, 5*time.Second, linkUp, "INFO", "replication"); err != nil {
		return fmt.Errorf("failover: s%d resyncing from s%d: %w", fo.primary.ID, fo.promoted.ID, err)
	}
	return fo.undo(ctx)
}

// undo makes the original primary the primary again and the promoted replica its
// replica.
func (fo failover) undo(ctx context.Context) error {
	_, err1 := fo.rc.Command(ctx, fo.primary.ID, "REPLICAOF", "NO", "ONE")
	host, port := redisAddr(fo.primary)
	_, err2 := fo.rc.Command(ctx, fo.promoted.ID, "REPLICAOF", host, port)
	return joinErrs(err1, err2)
}

func (fo failover) holderWait() time.Duration {
	if fo.wait <= 0 {
		return DefaultHolderWait
	}
	return fo.wait
}

// newGrant waits for a lock granted after the split.
func (fo failover) newGrant(ctx context.Context) (Client, bool) { return fo.newGrantOn(ctx, fo.c) }

// newGrantOn waits for a lock granted on c after the split: a holder other than the
// one holding at the split, or any holder if none held then.
func (fo failover) newGrantOn(ctx context.Context, c Cluster) (Client, bool) {
	before, held := c.Holder()
	deadline := time.Now().Add(fo.holderWait())
	for time.Now().Before(deadline) {
		if h, ok := c.Holder(); ok && (!held || h.Process != before.Process) {
			return h, true
		}
		if !sleepCtx(ctx, 2*time.Millisecond) {
			return Client{}, false
		}
	}
	return Client{}, false
}
