package recipes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgRenewer watches a hold's row every third of the TTL (the session timeout). On
// pg-table-expiry it keeps the hold alive: it moves the row's expires_at to the
// server's clock plus the TTL, if the row is still the holder's, and then the
// lease's validity to the renewal's start plus the TTL less the drift allowance; one
// that fails leaves the validity as it was, so the lease reports lost when it runs
// out. On pg-table, whose rows never expire, it only reads the row back. Either way
// a row found gone or another's reports lost (a takeover, or a failover to a standby
// that never saw the grant).
type pgRenewer struct {
	stop chan struct{}
	done chan struct{}
}

func startPgRenewer(r *pgTable, owner string, gen uint64) *pgRenewer {
	w := &pgRenewer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(r.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			if !r.renewOnce(owner, gen) {
				return
			}
		}
	}()
	return w
}

// halt stops the renewer and waits until it has; a nil renewer is fine. It must not
// be called with the session's mutex held.
func (w *pgRenewer) halt() {
	if w == nil {
		return
	}
	close(w.stop)
	<-w.done
}

// renewOnce renews the hold once; false when the hold is over.
func (r *pgTable) renewOnce(owner string, gen uint64) bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	start := time.Now()
	c, err := r.s.ready(context.Background())
	if err != nil {
		r.log.Printf("renew: %v", err)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.s.io)
	defer cancel()
	q, args := "SELECT 1 FROM zlc_locks WHERE name = $1 AND owner = $2", []any{r.cfg.Path, owner}
	if r.expiry {
		q = `UPDATE zlc_locks SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
		WHERE name = $1 AND owner = $2`
		args = append(args, r.ttl.Milliseconds())
	}
	tag, err := c.Exec(ctx, q, args...)
	switch {
	case err != nil:
		r.log.Printf("renew: %v", err)
		return true
	case tag.RowsAffected() == 0:
		r.lease.lose(gen, "renew: the lock's row is gone or another's") // taken over, or lost by a failover
		return false
	}
	return r.lease.extend(gen, start.Add(r.ttl-redisDrift(r.ttl)))
}

// The counter workload on PostgreSQL: the counter is a row of zlc_counters named
// Config.CounterPath (made at init), in the lock's database. Fenced, pg-table checks
// in the same statement that the lock's row is still this holder's (UPDATE ... WHERE
// EXISTS): the resource lives in the lock's database. pg-table-expiry fences by
// token instead, as a resource elsewhere would: the row keeps the highest token it
// has seen and refuses an access with a lower one, reads included (Kleppmann's
// fenced storage, as the Redis counter does).

// counterQuery returns the statement of a counter access and its arguments.
func (r *pgTable) counterQuery(write bool, v int64) (string, []any) {
	name := r.cfg.CounterPath
	const owned = " AND EXISTS (SELECT 1 FROM zlc_locks WHERE name = $3 AND owner = $4)"
	switch {
	case !r.cfg.Fenced && write:
		return "UPDATE zlc_counters SET value = $2 WHERE name = $1", []any{name, v}
	case !r.cfg.Fenced:
		return "SELECT value FROM zlc_counters WHERE name = $1", []any{name}
	case !r.expiry && write:
		return "UPDATE zlc_counters SET value = $2 WHERE name = $1" + owned, []any{name, v, r.cfg.Path, r.owner}
	case !r.expiry:
		return "SELECT value FROM zlc_counters WHERE name = $1 AND EXISTS (SELECT 1 FROM zlc_locks WHERE name = $2 AND owner = $3)",
			[]any{name, r.cfg.Path, r.owner}
	case write:
		return "UPDATE zlc_counters SET value = $2, fence = $3 WHERE name = $1 AND fence <= $3", []any{name, v, r.token}
	}
	return "UPDATE zlc_counters SET fence = $2 WHERE name = $1 AND fence <= $2 RETURNING value", []any{name, r.token}
}

// counterReady refuses a counter access without a counter, and a fenced one with no
// hold to show.
func (r *pgTable) counterReady() error {
	switch {
	case r.cfg.CounterPath == "":
		return Fail(errors.New("no counter path in init"))
	case r.cfg.Fenced && r.owner == "":
		return Fail(ErrFenced)
	}
	return nil
}

// Read implements Counter. A read's failure is definite: it leaves the counter as it
// was (a fenced read may have raised the fence, which only refuses older holders).
func (r *pgTable) Read(ctx context.Context) (int64, error) {
	if err := r.counterReady(); err != nil {
		return 0, err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	c, err := r.s.ready(ctx)
	if err != nil {
		return 0, Fail(fmt.Errorf("read %s: %w", r.cfg.CounterPath, err))
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.io)
	defer cancel()
	q, args := r.counterQuery(false, 0)
	var v int64
	err = c.QueryRow(ctx, q, args...).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && r.cfg.Fenced:
		return 0, Fail(fmt.Errorf("%w: the lock's row is not this holder's, or a newer token was seen", ErrFenced))
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, Fail(fmt.Errorf("read %s: %w", r.cfg.CounterPath, err))
	}
	return v, nil
}

// Write implements Counter.
func (r *pgTable) Write(ctx context.Context, v int64) error {
	if err := r.counterReady(); err != nil {
		return err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	c, err := r.s.ready(ctx)
	if err != nil {
		return Fail(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.io)
	defer cancel()
	q, args := r.counterQuery(true, v)
	tag, err := c.Exec(ctx, q, args...)
	switch {
	case err != nil && pgDefinite(err):
		return Fail(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
	case err != nil:
		return Info(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
	case tag.RowsAffected() == 0 && r.cfg.Fenced:
		return Fail(fmt.Errorf("%w: the lock's row is not this holder's, or a newer token was seen", ErrFenced))
	case tag.RowsAffected() == 0:
		return Fail(fmt.Errorf("write %s: the counter's row is missing", r.cfg.CounterPath))
	}
	return nil
}
