package sqldb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// The counter workload on Postgres keeps its value in the row of zlc_counters named
// by the counter's path, on the primary (Leader), where the pg-table recipes write
// it. The harness works on it as the lock's user, so the tables it makes are the
// workers' own.

// pgCounterBound bounds the harness's counter requests (DDL under load can take
// more than a query's second).
const pgCounterBound = 10 * time.Second

// onPrimary runs fn as the lock tables' owner (pgOwner) on the primary.
func (p *Postgres) onPrimary(ctx context.Context, fn func(context.Context, *pgx.Conn) error) error {
	return p.onPrimaryAs(ctx, pgOwner, fn)
}

// onPrimaryAs runs fn as role on the primary.
func (p *Postgres) onPrimaryAs(ctx context.Context, role pgRole, fn func(context.Context, *pgx.Conn) error) error {
	id, ok := p.Leader(ctx)
	if !ok {
		return errors.New("no server answers as the primary")
	}
	return p.queryAs(ctx, p.Servers[id-1], role, pgCounterBound, fn)
}

// MakeCounter creates the tables if they are missing (locknames.PostgresSchema) and sets the
// counter path's row to 0 (value and fence).
func (p *Postgres) MakeCounter(ctx context.Context, _ time.Duration, path string) error {
	err := p.onPrimary(ctx, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, locknames.PostgresSchema); err != nil {
			return fmt.Errorf("creating the tables: %w", err)
		}
		_, err := c.Exec(ctx, `INSERT INTO zlc_counters (name, value, fence) VALUES ($1, 0, 0)
			ON CONFLICT (name) DO UPDATE SET value = 0, fence = 0`, path)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: making the counter %s: %w", path, err)
	}
	return nil
}

// ReadCounter reads the counter path's value on the primary (0 when its row or the
// table is missing).
func (p *Postgres) ReadCounter(ctx context.Context, _ time.Duration, path string) (int64, error) {
	var v int64
	err := p.onPrimary(ctx, func(ctx context.Context, c *pgx.Conn) error {
		err := c.QueryRow(ctx, "SELECT value FROM zlc_counters WHERE name = $1", path).Scan(&v)
		var pe *pgconn.PgError
		if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pe) && pe.Code == pgUndefinedTable {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: reading the counter %s: %w", path, err)
	}
	return v, nil
}
