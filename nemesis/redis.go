package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RedisPort is the port every Redis instance of a run serves on.
const RedisPort = 6379

// RedisAdmin is a lock service of Redis instances the tool started: the Redis
// faults (failover, clock-jump) need it; restart records the persistence setting it
// reports. A fault asks the run's service for it (abilityOf).
type RedisAdmin interface {
	// RedisSettings are the instances' topology (single, replicas, redlock) and
	// persistence (none, aof-everysec, aof-always); ok is false when the service
	// has none to report.
	RedisSettings() (topology, persistence string, ok bool)
	// Command sends one command to instance id over a fresh connection from the
	// harness's namespace and returns its reply; an error reply is the error.
	Command(ctx context.Context, id int, args ...string) (any, error)
}

// redisOf returns the run's service as Redis instances, or an error that says the
// fault needs them.
func redisOf(c Cluster, class Class) (RedisAdmin, string, error) {
	rc, ok := abilityOf[RedisAdmin](c)
	if !ok {
		return nil, "", fmt.Errorf("%s: acts on Redis instances only; this run's servers are not Redis", class)
	}
	topology, _, ok := rc.RedisSettings()
	if !ok {
		return nil, "", fmt.Errorf("%s: acts on Redis instances only; this run's servers are not Redis", class)
	}
	return rc, topology, nil
}

// redisPersistence is the run's Redis persistence setting, "" when its servers are
// not Redis.
func redisPersistence(c Cluster) string {
	if rc, ok := abilityOf[RedisAdmin](c); ok {
		if _, p, ok := rc.RedisSettings(); ok {
			return p
		}
	}
	return ""
}

// redisAddr is instance s's client address as another instance names it (REPLICAOF).
func redisAddr(s Server) (host, port string) {
	return s.Host.Addr().String(), strconv.Itoa(RedisPort)
}

// waitRedis polls instance id with cmd until ok accepts the reply, for at most
// within; the error says what the last reply or error was.
func waitRedis(ctx context.Context, rc RedisAdmin, id int, within time.Duration, ok func(any) bool, cmd ...string) error {
	deadline := time.Now().Add(within)
	var last string
	for {
		v, err := rc.Command(ctx, id, cmd...)
		if err == nil && ok(v) {
			return nil
		}
		last = fmt.Sprint(v)
		if err != nil {
			last = err.Error()
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s on s%d: not as wanted within %s (last: %.120s)", strings.Join(cmd, " "), id, within, last)
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// isPong accepts PING's answer.
func isPong(v any) bool { return v == "PONG" }

// linkUp accepts a replica's INFO replication that says its link to the primary is up
// (so a full resync, if one was needed, has replaced its data).
func linkUp(v any) bool {
	s, ok := v.(string)
	return ok && strings.Contains(s, "master_link_status:up")
}

// joinErrs joins errs, nil when every one is nil.
func joinErrs(errs ...error) error { return errors.Join(errs...) }

var (
	_ fault = (*Restart)(nil)
	_ fault = (*Failover)(nil)
)

// forgetting names the restarted instances whose restart can forget a lock key: every
// one, but on the replicas topology only the primary (a replica resyncs from it).
func forgetting(ctx context.Context, c Cluster, ids []int) []string {
	rc, ok := abilityOf[RedisAdmin](c)
	if !ok {
		return serverNames(ids)
	}
	if topology, _, _ := rc.RedisSettings(); topology != "replicas" {
		return serverNames(ids)
	}
	if primary, ok := c.Leader(ctx); ok && slices.Contains(ids, primary) {
		return []string{serverName(primary)}
	}
	return []string{}
}

// Restart kills servers and starts them again at once (ServerHost.Kill, Start), then
// waits until a Redis instance answers PING again. What the server kept is what its
// persistence kept: a Redis instance with persistence none comes back empty, so the
// holder's key is gone while the holder's validity runs; with AOF always it comes back
// with every acknowledged write. On ZooKeeper (every write fsynced) it is a kill with
// no downtime to speak of. Undo starts a server still down. The record names the
// Redis persistence setting and the instances whose restart can forget a key
// ("forgetting"), which the cause reads.
type Restart struct {
	// Target says which servers.
	Target Target
}

// Apply restarts the target servers.
func (f Restart) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Restart) plan(ctx context.Context, c Cluster, rng *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassRestart), "target": string(f.Target)}
	ids, err := pickRecorded(ctx, c, v, f.Target, rng)
	if err != nil {
		return plan{value: v}, err
	}
	persistence := redisPersistence(c)
	if persistence != "" {
		v["persistence"] = persistence
		v["forgetting"] = forgetting(ctx, c, ids)
	}
	recordSessionsEnd(c, v)
	ss := serversByID(c, ids)
	undo := func(ctx context.Context) error {
		var errs []error
		for _, s := range ss {
			if s.Host.Pid() == 0 {
				errs = append(errs, s.Host.Start(ctx))
			}
		}
		return errors.Join(errs...)
	}
	apply := func(ctx context.Context) error {
		var errs []error
		for _, s := range ss {
			if err := s.Host.Kill(ctx); err != nil {
				errs = append(errs, fmt.Errorf("restart server %d: kill: %w", s.ID, err))
			} else if err := s.Host.Start(ctx); err != nil {
				errs = append(errs, fmt.Errorf("restart server %d: start: %w", s.ID, err))
			}
		}
		if rc, ok := abilityOf[RedisAdmin](c); ok && persistence != "" {
			for _, s := range ss {
				errs = append(errs, waitRedis(ctx, rc, s.ID, 5*time.Second, isPong, "PING"))
			}
		}
		return errors.Join(errs...)
	}
	return plan{value: v, apply: apply, undo: undo}, nil
}
