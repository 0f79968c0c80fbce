package recipes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The counter workload on Redis: the counter is a key on the lock's instance (on a
// Redis Cluster, the primary of its own slot) (Config.CounterPath, verbatim), the
// resource the lock protects. Fenced, the counter
// keeps the highest fencing token it has seen in "<counter>:fence" (on a Redis
// Cluster "{<counter>}:fence", in the counter's slot) and refuses an
// access with a lower one, as Kleppmann's fenced storage does: every read and write
// first records its hold's token, so a holder paused past its TTL cannot write after
// the next holder read.
var (
	// redisFencedReadScript: KEYS[1] the counter, KEYS[2] its highest token seen;
	// ARGV[1] the hold's token. The counter's value (nil when missing), or the error
	// FENCED when a higher token was seen.
	redisFencedReadScript = redis.NewScript(`local seen = tonumber(redis.call("GET", KEYS[2]) or "0")
local t = tonumber(ARGV[1])
if t < seen then
	return redis.error_reply("FENCED token " .. ARGV[1] .. " is older than " .. seen)
end
redis.call("SET", KEYS[2], ARGV[1])
return redis.call("GET", KEYS[1])`)
	// redisFencedWriteScript: as the read, then sets KEYS[1] to ARGV[2]; returns 1.
	redisFencedWriteScript = redis.NewScript(`local seen = tonumber(redis.call("GET", KEYS[2]) or "0")
local t = tonumber(ARGV[1])
if t < seen then
	return redis.error_reply("FENCED token " .. ARGV[1] .. " is older than " .. seen)
end
redis.call("SET", KEYS[2], ARGV[1])
redis.call("SET", KEYS[1], ARGV[2])
return 1`)
)

var _ Counter = (*redisLock)(nil)

// Read implements Counter: GET of the counter; fenced, the read script.
func (r *redisLock) Read(ctx context.Context) (int64, error) {
	if err := r.counterReady(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.io)
	defer cancel()
	var res *redis.Cmd
	if r.cfg.Fenced {
		res = redisFencedReadScript.Run(ctx, r.node.client, r.counterKeys(), r.token)
	} else {
		res = r.node.client.Do(ctx, "GET", r.cfg.CounterPath)
	}
	s, err := res.Text()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case fenced(err):
		return 0, Fail(fmt.Errorf("%w: %v", ErrFenced, err))
	case err != nil:
		// A read leaves the counter as it was: its failure is definite.
		return 0, Fail(fmt.Errorf("read %s: %w", r.cfg.CounterPath, err))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, Fail(fmt.Errorf("read %s: %q is not a counter: %w", r.cfg.CounterPath, s, err))
	}
	return v, nil
}

// Write implements Counter: SET of the counter; fenced, the write script.
func (r *redisLock) Write(ctx context.Context, v int64) error {
	if err := r.counterReady(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.io)
	defer cancel()
	var err error
	if r.cfg.Fenced {
		err = redisFencedWriteScript.Run(ctx, r.node.client, r.counterKeys(), r.token, v).Err()
	} else {
		err = r.node.client.Set(ctx, r.cfg.CounterPath, v, 0).Err()
	}
	switch {
	case err == nil:
		return nil
	case fenced(err):
		return Fail(fmt.Errorf("%w: %v", ErrFenced, err))
	case redisReply(err) || redisDefinite(err):
		return Fail(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
	}
	return Info(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
}

// counterReady refuses a counter access without a counter, and a fenced one with no
// hold's token to show.
func (r *redisLock) counterReady() error {
	switch {
	case r.cfg.CounterPath == "":
		return Fail(errors.New("no counter path in init"))
	case r.cfg.Fenced && r.token == 0:
		return Fail(ErrFenced)
	}
	return nil
}

// counterKeys are the fenced scripts' keys: the counter and its highest token seen.
func (r *redisLock) counterKeys() []string {
	return []string{r.cfg.CounterPath, r.counterFence}
}

// fenced reports whether err is the fenced scripts' refusal.
func fenced(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "FENCED")
}
