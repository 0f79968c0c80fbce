package sqldb

import (
	"context"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// TestPostgresCounter: ReadCounter is 0 before the tables exist; MakeCounter makes
// them (the workers' own, as the lock's user) and sets the counter to 0; a worker's
// write shows in ReadCounter; MakeCounter again resets it.
func TestPostgresCounter(t *testing.T) {
	p, w := startTestPostgres(t, false)
	ctx := context.Background()
	const path = "/zlc/counter"
	if n, err := p.ReadCounter(ctx, time.Second, path); err != nil || n != 0 {
		t.Fatalf("ReadCounter before the tables = %d, %v", n, err)
	}
	if err := p.MakeCounter(ctx, time.Second, path); err != nil {
		t.Fatal(err)
	}
	if n, err := p.ReadCounter(ctx, time.Second, path); err != nil || n != 0 {
		t.Fatalf("ReadCounter of a new counter = %d, %v", n, err)
	}
	c := pgClient(t, w, p.Servers[0].ClientAddr())
	if _, err := c.Exec(ctx, locknames.PostgresSchema); err != nil { // as a recipe's init does
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "UPDATE zlc_counters SET value = 7, fence = 3 WHERE name = $1", path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO zlc_locks (name, owner) VALUES ('/zlc/lock', '0x1:a')"); err != nil {
		t.Fatalf("the lock's user cannot write the lock table MakeCounter made: %v", err)
	}
	if n, err := p.ReadCounter(ctx, time.Second, path); err != nil || n != 7 {
		t.Fatalf("ReadCounter after a write of 7 = %d, %v", n, err)
	}
	if n, err := p.ReadCounter(ctx, time.Second, "/zlc/no-such-counter"); err != nil || n != 0 {
		t.Fatalf("ReadCounter of a missing row = %d, %v", n, err)
	}
	if err := p.MakeCounter(ctx, time.Second, path); err != nil {
		t.Fatal(err)
	}
	var v, fence int64
	if err := c.QueryRow(ctx, "SELECT value, fence FROM zlc_counters WHERE name = $1", path).Scan(&v, &fence); err != nil || v != 0 || fence != 0 {
		t.Fatalf("after MakeCounter again: value %d, fence %d, %v", v, fence, err)
	}
}
