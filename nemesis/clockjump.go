package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

var _ fault = (*ClockJump)(nil)

// DefaultClockJump is a clock-jump's Δ when the schedule draws it: twice the session
// timeout (a Redis lock's TTL), so every lock key on the instance expires at once.
func DefaultClockJump(sessionTimeout time.Duration) time.Duration { return 2 * sessionTimeout }

// clockJumpScript shortens every key's time to live by ARGV[1] ms, deleting a key
// whose TTL is no longer than that: what a forward jump of the server's wall clock
// by ARGV[1] ms does to its expiries. A key without a TTL is left alone. It runs as
// one script, so no command sees half of the jump; it returns {shifted, expired}.
const clockJumpScript = `
local delta = tonumber(ARGV[1])
local shifted, expired = 0, 0
for _, k in ipairs(redis.call('KEYS', '*')) do
  local ttl = redis.call('PTTL', k)
  if ttl > delta then
    redis.call('PEXPIRE', k, ttl - delta)
    shifted = shifted + 1
  elseif ttl >= 0 then
    redis.call('DEL', k)
    expired = expired + 1
  end
end
return {shifted, expired}
`

// ClockJump emulates a forward jump of Δ of one Redis instance's wall clock, as its
// keys' expiries see it: one Lua script shortens every key's TTL by Δ and deletes the
// keys whose TTL was at most Δ. Neither libfaketime nor time namespaces can shift a
// Redis server's wall clock here. What it does not emulate: the server's other clocks
// (its cron, client timeouts, replication timeouts, INFO's times), a backward jump,
// and any client's clock (a recipe's validity runs on its own monotonic clock). On the
// replicas topology it acts on the primary whatever the target (a replica expires
// nothing itself; it follows the primary's deletions). The fault is over when applied;
// there is nothing to undo (a clock that jumped does not jump back).
type ClockJump struct {
	// Target says which instances (each gets the same jump).
	Target Target
	// Delta is the jump (> 0).
	Delta time.Duration
}

// Apply jumps the target instances' clocks.
func (f ClockJump) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f ClockJump) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassClockJump), "target": string(f.Target), "delta_ms": f.Delta.Milliseconds()}
	rc, topology, err := redisOf(c, ClassClockJump)
	if err != nil {
		return plan{value: v}, err
	}
	if f.Delta <= 0 {
		return plan{value: v}, fmt.Errorf("clock-jump: want a jump > 0, got %s", f.Delta)
	}
	ids, note, err := pickServers(ctx, c, f.Target, rng)
	if err != nil {
		return plan{value: v}, err
	}
	if topology == "replicas" {
		if id, ok := c.Leader(ctx); ok {
			ids, note = []int{id}, "replicas: the primary (a replica expires nothing itself)"
		}
	}
	recordServers(v, ids, note)
	apply := func(ctx context.Context) error {
		for _, id := range ids {
			r, err := rc.Command(ctx, id, "EVAL", clockJumpScript, "0", strconv.FormatInt(f.Delta.Milliseconds(), 10))
			if err != nil {
				return fmt.Errorf("clock-jump on s%d: %w", id, err)
			}
			if n, ok := r.([]any); ok && len(n) == 2 {
				v["shifted_"+serverName(id)], v["expired_"+serverName(id)] = n[0], n[1]
			}
		}
		return nil
	}
	return plan{value: v, apply: apply, undo: noUndo}, nil
}
