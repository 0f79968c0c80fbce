package nemesis

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// tableStandbyCut is the table that cuts a standby off from its primary while a
// failover waits for a grant the standby must not see.
const tableStandbyCut = "standbycut"

// promoteTimeout bounds a failover from the primary's crash to the old primary
// serving again as the new one's standby, however the run's context ends.
const promoteTimeout = 2 * time.Minute

// StandbyPromoter is a lock service that has a primary and a streaming standby
// that can be promoted (PostgreSQL): Failover needs it on a service that is not
// Redis.
type StandbyPromoter interface {
	// HasStandby reports whether the run's service has a standby to promote now.
	HasStandby() bool
	// PromoteStandby promotes server id, a standby, once the primary has crashed,
	// and brings the old primary back as the new primary's standby; it returns when
	// the new primary serves (the old one may still be catching up).
	PromoteStandby(ctx context.Context, id int) error
}

// standbyPlan is Failover on a database with a streaming standby, made so that a
// grant is lost for certain, as when a primary crashes before its last commits
// reached the standby (asynchronous replication):
//
//  1. split: the standby drops every packet from the primary (table zlc_standbycut),
//     so that it sees none of the primary's commits from now on;
//  2. grant: it waits (up to HolderWait) for a lock granted after the split;
//  3. crash: the primary is SIGKILLed (every session and advisory lock on it ends);
//  4. promote: the split is removed and the standby promoted; the workers' clients
//     (which list both servers and want a read-write one) find it; the old primary
//     comes back as its standby, so that the next failover goes the other way.
//
// Steps 3-4 run to their end even when the run ends meanwhile (within
// promoteTimeout). Undo removes the split; a primary already killed is brought back
// by promote only.
// The record names the primary, the standby promoted, the holder whose grant was lost
// and how long the service took to serve again (down_ms).
func (f Failover) standbyPlan(ctx context.Context, c Cluster, sp StandbyPromoter, v map[string]any) (plan, error) {
	ss := sortedServers(c)
	primaryID, ok := c.Leader(ctx)
	primary, known := serverByID(ss, primaryID)
	if !ok || !known || len(ss) != 2 {
		return plan{value: v}, fmt.Errorf("failover: no primary among %d servers", len(ss))
	}
	standby := ss[0]
	if standby.ID == primary.ID {
		standby = ss[1]
	}
	v["primary"], v["promoted"] = serverName(primary.ID), serverName(standby.ID)
	v["replication"] = "asynchronous" // the cause classes name synchronous replication as the fix
	cut := []netHost{standby.Host}
	apply := func(ctx context.Context) error {
		set, err := addrSet([]netip.Addr{primary.Host.Addr()})
		if err != nil {
			return err
		}
		if err := nftReplace(ctx, standby.Host, tableStandbyCut, chain("input", "ip saddr "+set+" drop")); err != nil {
			return fmt.Errorf("failover: cut s%d off from s%d: %w", standby.ID, primary.ID, err)
		}
		fo := failover{wait: f.HolderWait}
		if h, ok := fo.newGrantOn(ctx, c); ok {
			v["holder"] = h.Process
		} else {
			v["note"] = fmt.Sprintf("no lock granted within %s of the split", fo.holderWait())
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// From the crash on, the failover runs to its end even if the run ends
		// meanwhile: a primary killed and a standby never promoted, or an old
		// primary half rebuilt, would leave the run's servers broken.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promoteTimeout)
		defer cancel()
		down := time.Now()
		defer func() { v["down_ms"] = time.Since(down).Milliseconds() }()
		if err := primary.Host.Kill(ctx); err != nil {
			return fmt.Errorf("failover: crash s%d: %w", primary.ID, err)
		}
		if err := nftDelete(ctx, standby.Host, tableStandbyCut); err != nil {
			return fmt.Errorf("failover: remove the cut of s%d: %w", standby.ID, err)
		}
		if err := sp.PromoteStandby(ctx, standby.ID); err != nil {
			return fmt.Errorf("failover: promote s%d: %w", standby.ID, err)
		}
		return nil
	}
	return plan{value: v, nets: cut, apply: apply, undo: deleteTables(cut, tableStandbyCut)}, nil
}
