package sqldb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Failover with the standby. The primary (primaryID: server 1 at the start, then
// each Failover's target) crashes, the standby is promoted, and the old primary is
// rebuilt from the new one as its streaming standby, so that the run again has a
// primary and a standby and the next Failover goes back. Everything it writes is in
// the old primary's own directory (zlcpg-sN, or its node directory on an SSH node),
// which Close removes.

// standbyWait bounds the wait for a rebuilt standby to stream.
const standbyWait = 30 * time.Second

// primaryID is the server the tool made the primary, which standbys stream from.
func (p *Postgres) primaryID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

// Failover crashes the primary (from: its server host's Kill, SIGKILL of every
// process in its namespace; nothing is flushed), promotes the standby (to:
// pg_promote), then rebuilds the old primary as a streaming standby of the new one
// (its data directory removed, pg_basebackup from the new primary as the postgres
// user, its configuration written with the new primary in primary_conninfo,
// started, waited for until it streams). Leader is to from then on; Connect, which
// names both servers, is unchanged (the workers ask for a read-write server).
// Without a standby it is an error. LastFailover says how long each step took.
func (p *Postgres) Failover(ctx context.Context) (from, to int, err error) {
	if len(p.Servers) < 2 {
		return 0, 0, errors.New("postgres: failover needs a standby (PostgresConfig.Standby), and this run has the primary alone")
	}
	to = p.Servers[0].ID
	if to == p.primaryID() {
		to = p.Servers[1].ID
	}
	from, err = p.failoverTo(ctx, to)
	return from, to, err
}

// HasStandby reports whether there is a standby to promote now: a second server,
// running.
func (p *Postgres) HasStandby() bool {
	if len(p.Servers) < 2 {
		return false
	}
	id := p.primaryID()
	for _, s := range p.Servers {
		if s.ID != id && s.Host.Pid() != 0 {
			return true
		}
	}
	return false
}

// PromoteStandby is Failover to server id, a standby, typically once the primary
// has crashed (a primary already dead is not killed again, and a standby already
// out of recovery is not promoted again). It returns once the old primary streams
// from id as its standby.
func (p *Postgres) PromoteStandby(ctx context.Context, id int) error {
	if _, err := p.server(id); err != nil {
		return err
	}
	if id == p.primaryID() {
		return fmt.Errorf("postgres: promote server %d: it is the primary, not a standby", id)
	}
	_, err := p.failoverTo(ctx, id)
	return err
}

// failoverTo is Failover to server to, from the primary, which it returns.
func (p *Postgres) failoverTo(ctx context.Context, to int) (from int, err error) {
	p.failing.Lock()
	defer p.failing.Unlock()
	from = p.primaryID()
	var phases []startPhase
	defer func() {
		p.mu.Lock()
		p.lastFailover = phases
		p.mu.Unlock()
	}()
	old := p.Servers[from-1]
	if err := timed(&phases, fmt.Sprintf("crash s%d", from), func() error { return old.Host.Kill(ctx) }); err != nil {
		return from, fmt.Errorf("postgres: failover: crash the primary, server %d: %w", from, err)
	}
	if err := timed(&phases, fmt.Sprintf("promote s%d", to), func() error { return p.promoteStandby(ctx, to) }); err != nil {
		return from, fmt.Errorf("postgres: failover from server %d: %w", from, err)
	}
	if err := p.rebuildStandby(ctx, old, &phases); err != nil {
		return from, fmt.Errorf("postgres: failover to server %d: rebuilding server %d as its standby: %w", to, from, err)
	}
	return from, nil
}

// promoteStandby promotes server id (Promote) unless it is already out of
// recovery, and makes it the primary the standbys stream from.
func (p *Postgres) promoteStandby(ctx context.Context, id int) error {
	var rec bool
	if err := p.queryRow(ctx, p.Servers[id-1], "SELECT pg_is_in_recovery()", nil, &rec); err != nil {
		return fmt.Errorf("postgres: server %d, to promote: %w", id, err)
	}
	if rec {
		if err := p.Promote(ctx, id); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.primary, p.promoted = id, id
	p.mu.Unlock()
	return nil
}

// rebuildStandby makes server s, stopped, a streaming standby of the primary: it
// removes s's data directory (and a shared memory segment its killed postmaster
// left), clones the primary into it, writes its configuration, starts it and waits
// until it streams. Each step is timed into phases.
func (p *Postgres) rebuildStandby(ctx context.Context, s *Server, phases *[]startPhase) error {
	type step struct {
		name string
		fn   func() error
	}
	steps := []step{
		{"remove the old data", func() error {
			return errors.Join(removeLeftSegment(s.Data), os.RemoveAll(s.Data))
		}},
		{fmt.Sprintf("pg_basebackup s%d from s%d", s.ID, p.primaryID()), func() error { return p.basebackup(ctx, s) }},
		{"configure and start", func() error {
			if err := p.writeConf(s); err != nil {
				return err
			}
			return s.host.Start(ctx)
		}},
		{"until it streams", func() error { return p.waitServers(ctx, standbyWait, s) }},
	}
	if p.remote != nil { // the same steps, on s's node
		steps = []step{{fmt.Sprintf("pg_basebackup s%d from s%d on its node, start", s.ID, p.primaryID()), func() error {
			return p.makeRemote(ctx, s, false, p.basebackupScript)
		}}, steps[3]}
	}
	for _, st := range steps {
		if err := timed(phases, st.name, st.fn); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return nil
}

// LastFailover is how long each step of the last Failover took, one "step
// duration" a step, in order (nil before the first).
func (p *Postgres) LastFailover() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ph := range p.lastFailover {
		out = append(out, ph.String())
	}
	return out
}
