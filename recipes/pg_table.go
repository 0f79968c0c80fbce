package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// pgTableMutant is a variant of the unique-index lock table: the two real recipes
// and the mutants.
type pgTableMutant int

// The variants of pg-table. Each mutant changes one thing of pg-table or
// pg-table-expiry.
const (
	pgTableCorrect pgTableMutant = iota
	// pgTableExpiry is pg-table-expiry, a real recipe: rows expire, a waiter takes
	// over an expired row, the holder renews.
	pgTableExpiry
	// pgTableDeleteByName (on pg-table-expiry) releases with DELETE by name only.
	pgTableDeleteByName
	// pgTableBlindRetry (on pg-table) sends the INSERT again after one whose outcome
	// is unknown, instead of reading the owner back.
	pgTableBlindRetry
	// pgTableTakeoverKeepsToken (on pg-table-expiry) takes an expired row over with
	// an UPDATE of its owner that keeps its fencing token.
	pgTableTakeoverKeepsToken
)

// pgTableVariants names the variants for the catalogue; expiry marks those with an
// expires_at column.
var pgTableVariants = []struct {
	m      pgTableMutant
	name   string
	expiry bool
	doc    string
}{
	{pgTableCorrect, "pg-table", false, "PostgreSQL unique-index lock table (pgx): INSERT (name, owner) to lock, DELETE by name and owner to unlock, waiters poll, an unknown INSERT is read back, identity-column fencing token; no expiry; a row check every third of the session timeout reports lost when the row is gone (a failover that lost it)"},
	{pgTableExpiry, "pg-table-expiry", true, "pg-table with an expires_at column: a waiter deletes an expired row and inserts its own, the holder renews every third of the TTL, lost when its validity runs out; the counter fences by token"},
	{pgTableDeleteByName, "mutant-pg-table-delete-by-name", true, "pg-table-expiry releasing with DELETE by name only: a holder whose row was taken over deletes the next holder's row"},
	{pgTableBlindRetry, "mutant-pg-table-blind-retry", false, "pg-table sending the INSERT again after one whose outcome is unknown: its own row, inserted by the first, blocks it and everyone else for ever"},
	{pgTableTakeoverKeepsToken, "mutant-pg-table-takeover-keeps-token", true, "pg-table-expiry taking an expired row over with an UPDATE of its owner that keeps the fencing token: the next holder shows the same token as the one it displaced"},
}

// NewPgTable builds pg-table (see pgTableVariants and docs/recipes.md, "Database
// recipes").
func NewPgTable(ctx context.Context, cfg Config) (Recipe, error) {
	return newPgTable(ctx, cfg, pgTableCorrect, nil)
}

// NewPgTableExpiry builds pg-table-expiry.
func NewPgTableExpiry(ctx context.Context, cfg Config) (Recipe, error) {
	return newPgTable(ctx, cfg, pgTableExpiry, nil)
}

// pgTableVariant returns the constructor of variant m.
func pgTableVariant(m pgTableMutant) Constructor {
	return func(ctx context.Context, cfg Config) (Recipe, error) { return newPgTable(ctx, cfg, m, nil) }
}

// pgTable is pg-table, pg-table-expiry or one of their mutants.
type pgTable struct {
	name   string
	m      pgTableMutant
	expiry bool
	cfg    Config
	log    *log.Logger
	s      *pgSession
	ttl    time.Duration
	lease  lease
	// owner and token are the current hold's ("" and 0 when none); request
	// goroutine only.
	owner string
	token int64
	renew *pgRenewer
}

var (
	_ Recipe  = (*pgTable)(nil)
	_ Counter = (*pgTable)(nil)
)

// dbLogger returns a database recipe's logger and fills in cfg's defaults.
func dbLogger(name string, cfg *Config) *log.Logger {
	w := cfg.Log
	if w == nil {
		w = io.Discard
	}
	if cfg.Events == nil {
		cfg.Events = nopEvents{}
	}
	return log.New(w, fmt.Sprintf("%s[%d] ", name, cfg.Worker), log.LstdFlags|log.Lmicroseconds)
}

func newPgTable(ctx context.Context, cfg Config, m pgTableMutant, dial dialFunc) (*pgTable, error) {
	v := pgTableVariants[m]
	if err := checkDBConfig(v.name, cfg, workloads.Mutex, workloads.Counter); err != nil {
		return nil, err
	}
	logger := dbLogger(v.name, &cfg)
	r := &pgTable{name: v.name, m: m, expiry: v.expiry, cfg: cfg, log: logger, ttl: cfg.SessionTimeout,
		lease: lease{events: cfg.Events},
		s: &pgSession{connString: pgConnString(cfg.Servers), dial: dial, io: dbIOTimeout(cfg.SessionTimeout),
			events: cfg.Events, log: logger}}
	err := pgInit(ctx, r.s, cfg, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, dbSchema); err != nil {
			return fmt.Errorf("creating the tables: %w", err)
		}
		if cfg.CounterPath != "" {
			if _, err := c.Exec(ctx, "INSERT INTO zlc_counters (name) VALUES ($1) ON CONFLICT DO NOTHING", cfg.CounterPath); err != nil {
				return fmt.Errorf("creating the counter: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", v.name, err)
	}
	return r, nil
}

// pgInit connects s and runs setup on it, trying again every redisInitPause for up
// to the session timeout (a fault may have cut the worker off for a while; the
// harness then retries the slot, as for a ZooKeeper session that did not come).
func pgInit(ctx context.Context, s *pgSession, cfg Config, setup func(context.Context, *pgx.Conn) error) error {
	deadline := time.Now().Add(cfg.SessionTimeout)
	for {
		s.mu.Lock()
		c, err := s.ready(ctx)
		if err == nil && setup != nil {
			sctx, cancel := context.WithTimeout(ctx, max(4*s.io, 5*time.Second))
			err = setup(sctx, c)
			cancel()
		}
		if err != nil {
			s.drop()
		}
		s.mu.Unlock()
		if err == nil {
			return nil
		}
		if pollWait(ctx, deadline, redisInitPause, err) != nil {
			return fmt.Errorf("gave up after the session timeout (%s): %w", cfg.SessionTimeout, err)
		}
	}
}

// Acquire implements Recipe: it polls try until the lock is held or the timeout.
func (r *pgTable) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := r.lease.begin(req, r.owner != ""); err != nil {
		return Grant{}, err
	}
	r.renew.halt()
	r.owner, r.token, r.renew = "", 0, nil
	deadline := deadlineOf(req.Timeout)
	var lastErr error
	for {
		g, ok, err := r.try(ctx)
		switch {
		case ok:
			return g, nil
		case errors.Is(err, errPollAgain):
			lastErr = err
			r.log.Printf("acquire: %v", err)
		case err != nil:
			return Grant{}, err
		}
		if err := pollWait(ctx, deadline, pollBackoff(), lastErr); err != nil {
			return Grant{}, err
		}
	}
}

// try makes one attempt: ok with the grant, a classified error (Fail, Info, or one
// wrapping errPollAgain), or neither when another owner holds the row.
func (r *pgTable) try(ctx context.Context) (Grant, bool, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	c, err := r.s.ready(ctx)
	if err != nil {
		return Grant{}, false, err
	}
	rnd, err := randomToken()
	if err != nil {
		return Grant{}, false, Fail(err)
	}
	owner := lockValue(int64(r.s.pid), rnd[:16])
	pid, port := r.s.pid, r.s.port
	start := time.Now()
	token, ok, err := r.insert(ctx, c, owner)
	switch {
	case err != nil && pgCode(err) != "" && pgDefinite(err):
		return Grant{}, false, Fail(fmt.Errorf("acquire: %w", err))
	case err != nil && pgDefinite(err):
		return Grant{}, false, fmt.Errorf("%w: %w", errPollAgain, err)
	case err != nil && r.m == pgTableBlindRetry:
		return Grant{}, false, fmt.Errorf("%w: the INSERT's outcome is unknown (%w): sending it again", errPollAgain, err)
	case err != nil:
		if token, ok, err = r.readBack(ctx, owner, pid, port); err != nil {
			return Grant{}, false, Info(fmt.Errorf("acquire: the INSERT's outcome is unknown, and reading the owner back failed: %w", err))
		}
		if !ok {
			return Grant{}, false, fmt.Errorf("%w: the INSERT's outcome was unknown; read back, the row is not this worker's", errPollAgain)
		}
		r.log.Printf("acquire: the INSERT's outcome was unknown; read back, the row is this worker's (token %d)", token)
	case !ok:
		return Grant{}, false, nil
	}
	until := start.Add(r.ttl - redisDrift(r.ttl))
	if r.expiry && !time.Now().Before(until) {
		if _, err := r.del(ctx, owner); err != nil {
			return Grant{}, false, Info(fmt.Errorf("acquired after the validity ran out, and deleting the row failed: %w", err))
		}
		return Grant{}, false, fmt.Errorf("%w: acquired after the validity ran out: deleted", errPollAgain)
	}
	r.owner, r.token = owner, token
	gen := r.lease.grant(until, r.expiry)
	r.renew = startPgRenewer(r, owner, gen)
	place := workloads.LockPlace{Session: FormatSessionID(int64(r.s.pid)), Table: locknames.LockTable, Row: r.cfg.Path}
	return Grant{Token: json.RawMessage(strconv.FormatInt(token, 10)), Lock: &place}, true, nil
}

// insert runs the acquire as one batch, one implicit transaction: (with expiry) the
// takeover of an expired row, the INSERT ... ON CONFLICT DO NOTHING, then an UPDATE
// of the row if it is this owner's that draws the fencing token from the identity
// column (token = DEFAULT). Drawing it after the INSERT won, under the row's lock,
// orders the tokens as the grants: an INSERT's own default is drawn before it waits
// on a conflicting row, and a waiter could win later with an older value.
func (r *pgTable) insert(ctx context.Context, c *pgx.Conn, owner string) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.io)
	defer cancel()
	var ttl int64
	if r.expiry {
		ttl = r.ttl.Milliseconds()
	}
	b := &pgx.Batch{}
	switch {
	case r.m == pgTableTakeoverKeepsToken:
		b.Queue(`UPDATE zlc_locks SET owner = $2, expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
			WHERE name = $1 AND expires_at < clock_timestamp()`, r.cfg.Path, owner, ttl)
	case r.expiry:
		b.Queue("DELETE FROM zlc_locks WHERE name = $1 AND expires_at < clock_timestamp()", r.cfg.Path)
	}
	b.Queue(`INSERT INTO zlc_locks (name, owner, expires_at)
		VALUES ($1, $2, CASE WHEN $3::bigint > 0 THEN clock_timestamp() + $3::bigint * interval '1 millisecond' END)
		ON CONFLICT (name) DO NOTHING`, r.cfg.Path, owner, ttl)
	if r.m == pgTableTakeoverKeepsToken {
		b.Queue("SELECT token FROM zlc_locks WHERE name = $1 AND owner = $2", r.cfg.Path, owner)
	} else {
		b.Queue("UPDATE zlc_locks SET token = DEFAULT WHERE name = $1 AND owner = $2 RETURNING token", r.cfg.Path, owner)
	}
	res := c.SendBatch(ctx, b)
	for range b.Len() - 1 {
		if _, err := res.Exec(); err != nil {
			res.Close()
			return 0, false, err
		}
	}
	var token int64
	err := res.QueryRow().Scan(&token)
	if cerr := res.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		err = cerr // the commit's outcome
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// readBack reads the lock's row after an INSERT whose outcome is unknown, once the
// session that sent it is gone (endOld): ok with the token when the row is owner's.
func (r *pgTable) readBack(ctx context.Context, owner string, pid uint32, port int) (int64, bool, error) {
	if err := r.s.endOld(ctx, pid, port); err != nil {
		return 0, false, fmt.Errorf("ending the old session: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.io)
	defer cancel()
	var token int64
	err := r.s.conn.QueryRow(ctx, "SELECT token FROM zlc_locks WHERE name = $1 AND owner = $2", r.cfg.Path, owner).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// del runs the variant's release, on the session (s.mu held), and returns how many
// rows it deleted.
func (r *pgTable) del(ctx context.Context, owner string) (int64, error) {
	c, err := r.s.ready(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.io)
	defer cancel()
	q, args := "DELETE FROM zlc_locks WHERE name = $1 AND owner = $2", []any{r.cfg.Path, owner}
	if r.m == pgTableDeleteByName {
		q, args = "DELETE FROM zlc_locks WHERE name = $1", args[:1]
	}
	tag, err := c.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

// Release implements Recipe: DELETE by name and owner. After a DELETE whose outcome
// is unknown it ends the old session and deletes again (by owner, so it is
// idempotent): ok when that deletes the row, info when the row was gone already.
func (r *pgTable) Release(ctx context.Context) error {
	r.renew.halt()
	owner := r.owner
	r.owner, r.token, r.renew = "", 0, nil
	held := r.lease.end()
	if owner == "" {
		return Fail(errors.New("not held"))
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	pid, port := r.s.pid, r.s.port
	n, err := r.del(ctx, owner)
	switch {
	case !held:
		if err != nil {
			r.log.Printf("release after lost: %v", err)
		}
		return Fail(errValidityRanOut)
	case err != nil && pgDefinite(err):
		return Fail(fmt.Errorf("release: %w", err))
	case err != nil:
		if eerr := r.s.endOld(ctx, pid, port); eerr != nil {
			return Info(fmt.Errorf("release: %w (ending the old session failed: %v)", err, eerr))
		}
		n2, err2 := r.del(ctx, owner)
		if err2 == nil && n2 == 1 {
			return nil
		}
		return Info(fmt.Errorf("release: %w (deleting again: %d rows, %v)", err, n2, err2))
	case n == 0:
		return Fail(errors.New("not held: the lock's row is no longer this worker's"))
	}
	return nil
}

// Close implements Recipe: it deletes a row still held (best effort: a worker that
// dies cannot, and without expiry its row then stays) and closes the connection.
func (r *pgTable) Close() error {
	r.renew.halt()
	r.renew = nil
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.owner != "" && r.lease.end() {
		if _, err := r.del(context.Background(), r.owner); err != nil {
			r.log.Printf("close: deleting the row: %v", err)
		}
	}
	r.owner = ""
	r.s.drop()
	return nil
}
