package recipes

import (
	"context"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// pgAdvisoryVariants names pg-advisory and its mutants for the catalogue.
var pgAdvisoryVariants = []struct {
	m    sessionMutant
	name string
	doc  string
}{
	{sessCorrect, "pg-advisory", "PostgreSQL pg_advisory_lock on one dedicated pgx connection, lock_timeout for timed acquires, stacking (reentrant); a SELECT 1 heartbeat every third of the session timeout reports lost when the session is gone; cannot fence"},
	{sessXact, "mutant-pg-advisory-xact-lock", "pg-advisory locking with pg_advisory_xact_lock outside a transaction: the lock is released when the statement ends, at once"},
	{sessPool, "mutant-pg-advisory-pool", "pg-advisory unlocking through another pooled connection, a session that does not hold the lock (the false result ignored): the lock is never released"},
	{sessUnlockOnce, "mutant-pg-advisory-unlock-once", "pg-advisory counting nested acquires in the client but locking on the server each time, and unlocking once: a level stays held after the last release"},
	{sessNoHeartbeat, "mutant-pg-advisory-no-heartbeat", "pg-advisory without the heartbeat: a session killed by the server (its locks freed) is never reported lost"},
}

// NewPgAdvisory builds pg-advisory: a PostgreSQL session-level advisory lock whose
// key is the 64-bit FNV-1a hash of Config.Path (see sessionLock, pgAdvisoryDriver
// and docs/recipes.md, "Database recipes"). Kinds mutex and reentrant.
func NewPgAdvisory(ctx context.Context, cfg Config) (Recipe, error) {
	return newPgAdvisory(ctx, cfg, sessCorrect, nil)
}

// pgAdvisoryVariant returns the constructor of variant m.
func pgAdvisoryVariant(m sessionMutant) Constructor {
	return func(ctx context.Context, cfg Config) (Recipe, error) { return newPgAdvisory(ctx, cfg, m, nil) }
}

func newPgAdvisory(ctx context.Context, cfg Config, m sessionMutant, dial dialFunc) (*sessionLock, error) {
	name := ""
	for _, v := range pgAdvisoryVariants {
		if v.m == m {
			name = v.name
		}
	}
	if err := checkDBConfig(name, cfg, workloads.Mutex, workloads.Reentrant); err != nil {
		return nil, err
	}
	logger := dbLogger(name, &cfg)
	newDriver := func(events Events) *pgAdvisoryDriver {
		return &pgAdvisoryDriver{key: locknames.PostgresAdvisoryKey(cfg.Path), xact: m == sessXact,
			s: &pgSession{connString: pgConnString(cfg.Servers), dial: dial, io: dbIOTimeout(cfg.SessionTimeout),
				events: events, log: logger}}
	}
	var other sessionDriver
	if m == sessPool {
		other = newDriver(nopEvents{})
	}
	return newSessionLock(ctx, name, m, cfg, logger, newDriver(cfg.Events), other)
}

// pgAdvisoryDriver is pg-advisory's session: one pgx.Conn (pgSession). A timed
// acquire sets lock_timeout and calls pg_advisory_lock in one simple-protocol
// request: the server queues the waiter fairly and answers 55P03 when the time is
// up, a definite refusal. Polling pg_try_advisory_lock instead would let a waiter
// jump the queue and add a poll's latency; and a client-side deadline alone would
// close the connection (pgx), ending the session. The client's deadline is the
// timeout plus the request bound, for a server that does not answer at all.
type pgAdvisoryDriver struct {
	s    *pgSession
	key  int64
	xact bool
}

var _ sessionDriver = (*pgAdvisoryDriver)(nil)

func (d *pgAdvisoryDriver) open(ctx context.Context) error {
	_, err := d.s.ready(ctx)
	return err
}

func (d *pgAdvisoryDriver) lock(ctx context.Context, timeout time.Duration) error {
	ms := timeout.Milliseconds()
	if timeout > 0 {
		ms = max(ms, 1)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout+d.s.io)
		defer cancel()
	}
	fn := "pg_advisory_lock"
	if d.xact {
		fn = "pg_advisory_xact_lock"
	}
	_, err := d.s.conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d; SELECT %s(%d)", ms, fn, d.key))
	if pgCode(err) == "55P03" { // lock_not_available: lock_timeout
		return d.timedOut(ms)
	}
	return err
}

// timedOut is a session lock's acquire after lock_timeout (55P03). PostgreSQL can
// grant the lock to a waiter whose timeout is already pending and raise the timeout
// anyway (proc.c: LockErrorCleanup keeps the grant); a session-level advisory lock
// then outlives the failed statement, held by a session that was told it has
// nothing. The timeout comes only to a waiter, and a session already holding the
// key never waits (its lock stacks at once), so any hold of the key now is that
// grant: one pg_advisory_unlock gives it back. A transaction-level lock ended with
// the statement's transaction. If the unlock cannot be done, the outcome is
// unknown: the error is one the session lock ends the session for (sessionLock's
// Acquire, the one place that classifies), the unlock's own error only named, so
// that no reply of it reads as a definite refusal.
func (d *pgAdvisoryDriver) timedOut(ms int64) error {
	timeout := Fail(fmt.Errorf("%w: lock_timeout %dms", ErrTimeout, ms))
	if d.xact {
		return timeout
	}
	held, err := d.unlock(context.Background())
	switch {
	case err != nil:
		return fmt.Errorf("lock_timeout %dms, and giving back a grant that may have come with it failed: %v", ms, err)
	case held:
		d.s.log.Printf("acquire: lock_timeout %dms came after the server had granted the lock: given back", ms)
	}
	return timeout
}

func (d *pgAdvisoryDriver) unlock(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d.s.io)
	defer cancel()
	var ok bool
	err := d.s.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", d.key).Scan(&ok)
	return ok, err
}

func (d *pgAdvisoryDriver) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.s.io)
	defer cancel()
	_, err := d.s.conn.Exec(ctx, "SELECT 1")
	return err
}

func (d *pgAdvisoryDriver) definite(err error) bool { return pgDefinite(err) }

func (d *pgAdvisoryDriver) ended(err error) bool { return pgSessionEnded(err) }

func (d *pgAdvisoryDriver) drop() { d.s.drop() }

func (d *pgAdvisoryDriver) alive() bool { return !d.s.closed() }

func (d *pgAdvisoryDriver) place() workloads.LockPlace {
	return workloads.LockPlace{Session: FormatSessionID(int64(d.s.pid)), Advisory: []int64{d.key}}
}
