// Package redisopt owns how a go-redis client of one instance is configured to take
// part in a lock: the recipes' clients and the plain loop that is their yardstick
// (lockservice.Redis.PlainLoops) use the same options. The reasons are in
// docs/recipes.md, "Redis recipes".
package redisopt

import (
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// PasswordVar is the environment variable a Redis password is taken from, redis-cli's
// own: the harness's connections, the plain loop and the Go workers (which inherit
// the harness's environment) all read it here, and it is written nowhere.
const PasswordVar = "REDISCLI_AUTH"

// Password is the Redis password (PasswordVar; "" for none).
func Password() string { return os.Getenv(PasswordVar) }

// Lock returns the options of a lock's client of the instance at addr, every dial,
// read, write and pool wait bounded by limit (below the lock's TTL):
//   - MaxRetries -1: go-redis re-sends a command after a read timeout or EOF by
//     default (3 times), so a SET NX whose reply was lost would be re-sent and find
//     its own key; the caller must see the unknown outcome instead.
//   - ContextTimeoutEnabled: without it a request's context deadline does not bound
//     its socket I/O (go-redis uses context.Background() there).
//   - One dial attempt per request (go-redis tries 5 by default).
//   - PoolSize 1 (MaxActiveConns 1, no separate pipeline pool): one connection, so
//     the CLIENT ID learnt when it connects is the one the next command uses.
//   - RESP2, no CLIENT SETINFO, no maintenance notifications: Debian's Redis 7.0
//     knows neither of the latter, and a lock needs no push messages.
func Lock(addr string, limit time.Duration) *redis.Options {
	return &redis.Options{
		Addr:                     addr,
		Password:                 Password(),
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		ContextTimeoutEnabled:    true,
		DialTimeout:              limit,
		DialerRetries:            1,
		ReadTimeout:              limit,
		WriteTimeout:             limit,
		PoolTimeout:              limit,
		PoolSize:                 1,
		MaxActiveConns:           1,
		PipelinePoolSize:         -1,
		ConnMaxIdleTime:          -1,
	}
}

// Failover returns the options of a lock's client that finds the primary named
// master through the sentinels at sentinels (go-redis's failover client, its
// Sentinel mode) and follows a promotion, with Lock's options for every connection
// to the primary; the sentinels are asked with the same bounds.
func Failover(master string, sentinels []string, limit time.Duration) *redis.FailoverOptions {
	o := Lock("", limit)
	return &redis.FailoverOptions{
		MasterName:            master,
		SentinelAddrs:         sentinels,
		Password:              o.Password,
		Protocol:              o.Protocol,
		DisableIdentity:       o.DisableIdentity,
		MaxRetries:            o.MaxRetries,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		PoolTimeout:           o.PoolTimeout,
		PoolSize:              o.PoolSize,
		MaxActiveConns:        o.MaxActiveConns,
		ConnMaxIdleTime:       o.ConnMaxIdleTime,
		DialerRetries:         o.DialerRetries,
		PipelinePoolSize:      o.PipelinePoolSize,
	}
}

// IOTimeout bounds each request of a lock whose TTL is ttl: a quarter of it, between
// 10 ms and 1 s, so that several tries fit in the TTL.
func IOTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/4, 10*time.Millisecond), time.Second)
}
