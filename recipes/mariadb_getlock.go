package recipes

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// mariadbGetLockVariants names mariadb-getlock and its mutants for the catalogue.
var mariadbGetLockVariants = []struct {
	m    sessionMutant
	name string
	doc  string
}{
	{sessCorrect, "mariadb-getlock", "MariaDB GET_LOCK / RELEASE_LOCK on one dedicated database/sql connection (go-sql-driver/mysql), the acquire timeout as GET_LOCK's, stacking (reentrant); a SELECT 1 heartbeat every third of the session timeout reports lost when the session is gone; cannot fence"},
	{sessPool, "mutant-mariadb-pool", "mariadb-getlock releasing through another pooled connection, a session that does not hold the lock (RELEASE_LOCK's 0 ignored): the lock is never released"},
	{sessUnlockOnce, "mutant-mariadb-unlock-once", "mariadb-getlock counting nested acquires in the client but calling GET_LOCK each time, and RELEASE_LOCK once: a level stays held after the last release"},
	{sessNoHeartbeat, "mutant-mariadb-no-heartbeat", "mariadb-getlock without the heartbeat: a connection killed by the server (its locks freed) is never reported lost"},
}

// NewMariaDBGetLock builds mariadb-getlock on the first server of Config.Servers
// (see sessionLock, mariadbDriver and docs/recipes.md, "Database recipes"). Kinds
// mutex and reentrant.
func NewMariaDBGetLock(ctx context.Context, cfg Config) (Recipe, error) {
	return newMariaDBGetLock(ctx, cfg, sessCorrect, nil)
}

// mariadbGetLockVariant returns the constructor of variant m.
func mariadbGetLockVariant(m sessionMutant) Constructor {
	return func(ctx context.Context, cfg Config) (Recipe, error) { return newMariaDBGetLock(ctx, cfg, m, nil) }
}

func newMariaDBGetLock(ctx context.Context, cfg Config, m sessionMutant, dial dialFunc) (*sessionLock, error) {
	name := ""
	for _, v := range mariadbGetLockVariants {
		if v.m == m {
			name = v.name
		}
	}
	if err := checkDBConfig(name, cfg, workloads.Mutex, workloads.Reentrant); err != nil {
		return nil, err
	}
	logger := dbLogger(name, &cfg)
	dsn, err := mariadbDSN(cfg.Servers[0], dbIOTimeout(cfg.SessionTimeout), dial)
	if err != nil {
		return nil, Fail(fmt.Errorf("recipe %s: %w", name, err))
	}
	newDriver := func(events Events) *mariadbDriver {
		return &mariadbDriver{cfg: dsn, io: dbIOTimeout(cfg.SessionTimeout), events: events, log: logger,
			lockName: locknames.MariaDBLockName(cfg.Path)}
	}
	var other sessionDriver
	if m == sessPool {
		other = newDriver(nopEvents{})
	}
	return newSessionLock(ctx, name, m, cfg, logger, newDriver(cfg.Events), other)
}

// mariadbDSN parses a server's DSN (a bare host:port means the lock's user and
// database; a DSN without a password takes MYSQL_PWD's) and sets it up for a lock: the dial bounded by three request bounds, no
// read or write timeout (a GET_LOCK waits as long as its timeout; every request has a
// context deadline instead), parameters interpolated in the client (one round trip a
// statement, no server-side prepared statements).
func mariadbDSN(server string, io time.Duration, dial dialFunc) (*mysql.Config, error) {
	if !strings.Contains(server, "@") && !strings.Contains(server, "(") {
		server = "zlc@tcp(" + server + ")/zlc"
	}
	c, err := mysql.ParseDSN(server)
	if err != nil {
		return nil, err
	}
	if c.Passwd == "" {
		// An existing MariaDB's password (run --connect) is never in the DSN: the
		// harness hands the workers its environment, as the mysql client reads it.
		c.Passwd = os.Getenv("MYSQL_PWD")
	}
	c.Timeout = 3 * io
	c.InterpolateParams = true
	c.Logger = &mysql.NopLogger{}
	if dial != nil {
		c.DialFunc = dial
	}
	return c, nil
}

// mariadbDriver is mariadb-getlock's session: one *sql.Conn of a database/sql pool
// of its own. What go-sql-driver/mysql does when a request's context ends mid-flight:
// its watcher goroutine closes the network connection (mysqlConn.cancel, cleanup),
// the request returns the context's error, and the connection is bad from then on;
// the server ends the session, and frees its GET_LOCKs, once it sees the close. A
// context that ended before the request was sent fails it with nothing sent.
type mariadbDriver struct {
	cfg      *mysql.Config
	io       time.Duration
	events   Events
	log      *log.Logger
	lockName string

	db     *sql.DB
	conn   *sql.Conn
	broken bool
	// id is the connection's CONNECTION_ID(), its session.
	id int64
}

var _ sessionDriver = (*mariadbDriver)(nil)

func (d *mariadbDriver) open(ctx context.Context) error {
	if d.conn != nil && !d.broken {
		return nil
	}
	d.drop()
	connector, err := mysql.NewConnector(d.cfg)
	if err != nil {
		return Fail(err)
	}
	d.db = sql.OpenDB(connector)
	ctx, cancel := context.WithTimeout(ctx, 3*d.io)
	defer cancel()
	c, err := d.db.Conn(ctx)
	if err != nil {
		d.drop()
		return fmt.Errorf("%w: connecting: %w", errPollAgain, err)
	}
	d.conn = c
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		d.drop()
		return fmt.Errorf("%w: CONNECTION_ID(): %w", errPollAgain, err)
	}
	d.id = id
	d.events.Session(id, nil)
	return nil
}

// fail marks the connection broken after any error but a server's error reply.
func (d *mariadbDriver) fail(err error) error {
	var me *mysql.MySQLError
	if err != nil && !errors.As(err, &me) {
		d.broken = true
	}
	return err
}

func (d *mariadbDriver) lock(ctx context.Context, timeout time.Duration) error {
	// MariaDB's GET_LOCK answers NULL at once to a negative timeout (MySQL's "for
	// ever"): without a timeout it waits a year, bounded by ctx.
	secs := (365 * 24 * time.Hour).Seconds()
	if timeout > 0 {
		secs = timeout.Seconds()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout+d.io)
		defer cancel()
	}
	var got sql.NullInt64
	err := d.fail(d.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", d.lockName, secs).Scan(&got))
	switch {
	case err != nil:
		return err
	case !got.Valid:
		return Fail(errors.New("GET_LOCK returned NULL (an error in the server)"))
	case got.Int64 == 0:
		return Fail(fmt.Errorf("%w: GET_LOCK's timeout of %.3fs", ErrTimeout, secs))
	}
	return nil
}

func (d *mariadbDriver) unlock(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d.io)
	defer cancel()
	var got sql.NullInt64
	err := d.fail(d.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", d.lockName).Scan(&got))
	return got.Valid && got.Int64 == 1, err
}

func (d *mariadbDriver) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.io)
	defer cancel()
	_, err := d.conn.ExecContext(ctx, "SELECT 1")
	return d.fail(err)
}

// definite: a server's error reply, or driver.ErrBadConn, which go-sql-driver
// returns only when nothing was sent.
func (d *mariadbDriver) definite(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, errPollAgain)
}

// ended: MariaDB's replies carry no severity; a killed connection is a reply
// (definite) or a closed socket (unknown).
func (d *mariadbDriver) ended(error) bool { return false }

func (d *mariadbDriver) drop() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	if d.db != nil {
		d.db.Close()
		d.db = nil
	}
	d.broken = false
}

func (d *mariadbDriver) alive() bool { return d.conn != nil && !d.broken }

func (d *mariadbDriver) place() workloads.LockPlace {
	return workloads.LockPlace{Session: FormatSessionID(d.id), GetLock: d.lockName}
}
