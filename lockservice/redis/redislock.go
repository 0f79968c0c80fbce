package redis

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// How the run sees a Redis lock. The recipes keep the lock in one key (the run's lock
// path) whose value is "<session>:<random>", the session being the worker's CLIENT ID
// as "0x<hex>" (the id the worker reports as its session). The lock's one entry is the
// key itself while someone holds it; its owner is the session in the value; the live
// sessions are the clients connected to any instance.

// redisClient is one line of CLIENT LIST.
type redisClient struct {
	ID uint64
	// Addr is the client's address, ip:port.
	Addr string
	// Flags are CLIENT LIST's flags (N: a normal client; S, M: a replication link).
	Flags string
}

// host is the client's IP address (invalid when Addr is not ip:port).
func (c redisClient) host() netip.Addr {
	ap, err := netip.ParseAddrPort(c.Addr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// replication reports whether the client is a replication link, not a client.
func (c redisClient) replication() bool { return strings.ContainsAny(c.Flags, "SM") }

// parseClientList reads CLIENT LIST: one client a line, space-separated key=value
// fields; a line without a readable id is skipped.
func parseClientList(text string) []redisClient {
	var out []redisClient
	for _, line := range strings.Split(text, "\n") {
		var c redisClient
		ok := false
		for _, field := range strings.Fields(line) {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "id":
				n, err := strconv.ParseUint(v, 10, 64)
				c.ID, ok = n, err == nil
			case "addr":
				c.Addr = v
			case "flags":
				c.Flags = v
			}
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// clientMatch reports whether c is the client with session id (when hasID) at addr
// (when valid).
func clientMatch(c redisClient, id uint64, hasID bool, addr netip.Addr) bool {
	if hasID && c.ID != id {
		return false
	}
	if addr.IsValid() && c.host() != addr {
		return false
	}
	return hasID || addr.IsValid()
}

// clients asks one instance for CLIENT LIST, leaving out the asking connection
// itself and the replication links.
func (r *Redis) clients(ctx context.Context, in *lockservice.Member) ([]redisClient, error) {
	out, err := r.call(ctx, in, []string{"CLIENT", "ID"}, []string{"CLIENT", "LIST"})
	if err != nil {
		return nil, err
	}
	self, err := replyInt(out[0])
	if err != nil {
		return nil, err
	}
	text, err := replyString(out[1])
	if err != nil {
		return nil, err
	}
	var cs []redisClient
	for _, c := range parseClientList(text) {
		if c.ID != uint64(self) && !c.replication() {
			cs = append(cs, c)
		}
	}
	return cs, nil
}

// allClients asks every instance for its clients, in parallel (nil for an instance
// that does not answer).
func (r *Redis) allClients(ctx context.Context) [][]redisClient {
	out := make([][]redisClient, len(r.Instances))
	var wg sync.WaitGroup
	for i, in := range r.Instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], _ = r.clients(ctx, in)
		}()
	}
	wg.Wait()
	return out
}

// ServerOf is the instance a client is connected to: the first where a client with
// the session's id ("0x<hex>", CLIENT ID) is connected from addr, else the first where
// a client is connected from addr (client ids are each instance's own count, so an
// id alone may name clients of several instances). In a cluster a worker's client
// has a connection to several instances, and its session is its connection to the
// primary of the lock's slot: that instance is looked at first (Leader). On SSH
// nodes and an existing Redis every worker comes masqueraded from one address: the
// id alone, and only when exactly one instance has a client with it.
func (r *Redis) ServerOf(ctx context.Context, addr netip.Addr, session string) (int, bool) {
	id, hasID := lockservice.ParseSession(session)
	all := r.allClients(ctx)
	if r.external || r.remote != nil {
		return uniqueServer(all, func(c redisClient) bool { return hasID && c.ID == id }, r.Instances)
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	if r.cfg.Topology == RedisCluster {
		if lead, ok := r.clusterLeader(ctx); ok {
			order = append([]int{lead - 1}, slices.DeleteFunc(order, func(i int) bool { return i == lead-1 })...)
		}
	}
	for _, byID := range []bool{true, false} {
		if byID && !hasID || !byID && !addr.IsValid() {
			continue
		}
		for _, i := range order {
			for _, c := range all[i] {
				if clientMatch(c, id, byID, addr) {
					return r.Instances[i].ID, true
				}
			}
		}
	}
	return 0, false
}

// uniqueServer is the one instance (of instances, whose clients are all) with a
// client that match accepts; false when none or several have one.
func uniqueServer(all [][]redisClient, match func(redisClient) bool, instances []*lockservice.Member) (int, bool) {
	found := 0
	for i, cs := range all {
		if slices.ContainsFunc(cs, match) {
			if found != 0 {
				return 0, false
			}
			found = instances[i].ID
		}
	}
	return found, found != 0
}

// LiveSessions are the sessions (0x<hex> client ids) of every client connected to
// any instance that answers.
func (r *Redis) LiveSessions(ctx context.Context) map[string]bool {
	alive := map[string]bool{}
	for _, cs := range r.allClients(ctx) {
		for _, c := range cs {
			alive[lockservice.SessionName(c.ID)] = true
		}
	}
	return alive
}

// redisLock is a LockReader over the instances: each read is its own exchange.
type redisLock struct{ r *Redis }

var _ lockservice.LockReader = redisLock{}

// OpenLock returns a reader of the lock's key; it needs no session of its own.
func (r *Redis) OpenLock(context.Context, time.Duration) (lockservice.LockReader, error) {
	return redisLock{r: r}, nil
}

// Entries are the lock's keys (its path, and each key a worker's place named) that
// hold a value (the primary's; RedLock's: a value a majority of the instances hold).
// A lock whose Quorum is set is one entry, named its path, while a majority of the
// quorum's keys hold one value; its keys are no entries of their own.
func (l redisLock) Entries(lock lockservice.Lock, _ bool) ([]string, error) {
	var out []string
	if len(lock.Quorum) > 0 {
		_, _, ok, err := l.r.quorumValue(context.Background(), lock.Quorum)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, lock.Path)
		}
	}
	for _, key := range lock.Keys() {
		if inQuorum(lock, key) {
			continue
		}
		_, ok, err := l.r.lockValue(context.Background(), key)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, key)
		}
	}
	return out, nil
}

// Owner is the session that holds key name: the session of the place that wrote its
// value, or the one the value names (lockservice.Lock.OwnerOfValue); false when the
// key is none of the lock's or holds nothing.
func (l redisLock) Owner(lock lockservice.Lock, name string) (string, bool, error) {
	if len(lock.Quorum) > 0 && name == lock.Path {
		key, v, ok, err := l.r.quorumValue(context.Background(), lock.Quorum)
		if err != nil || !ok {
			return "", false, err
		}
		return lock.OwnerOfValue(key, v), true, nil
	}
	if !slices.Contains(lock.Keys(), name) || inQuorum(lock, name) {
		return "", false, nil
	}
	v, ok, err := l.r.lockValue(context.Background(), name)
	if err != nil || !ok {
		return "", false, err
	}
	return lock.OwnerOfValue(name, v), true, nil
}

// inQuorum reports whether key is read as part of lock's quorum (one of its keys,
// or the path that names it), not as an entry of its own.
func inQuorum(lock lockservice.Lock, key string) bool {
	return len(lock.Quorum) > 0 && (key == lock.Path || slices.Contains(lock.Quorum, key))
}

// quorumValue is the value more than half of keys hold, each read where it lives
// (on a cluster, the primary of its slot, from one look at the instances' views),
// and one of the keys that hold it; false when no value has a majority. A key
// that cannot be read counts as holding nothing; an error only when none could be.
func (r *Redis) quorumValue(ctx context.Context, keys []string) (string, string, bool, error) {
	read := r.lockValue
	if r.cfg.Topology == RedisCluster {
		views, err := r.clusterViews(ctx)
		if err != nil {
			return "", "", false, fmt.Errorf("redis cluster: no instance says who serves %s: %w", strings.Join(keys, ", "), err)
		}
		read = func(ctx context.Context, key string) (string, bool, error) {
			in, err := r.homeIn(views, key)
			if err != nil {
				return "", false, err
			}
			return r.get(ctx, in, key)
		}
	}
	values := make([]*string, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			v, ok, err := read(ctx, key)
			if ok {
				values[i] = &v
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if !slices.ContainsFunc(errs, func(err error) bool { return err == nil }) {
		return "", "", false, errors.Join(errs...)
	}
	v, ok := majorityValue(values)
	if !ok {
		return "", "", false, nil
	}
	i := slices.IndexFunc(values, func(p *string) bool { return p != nil && *p == v })
	return keys[i], v, true, nil
}

// Close: the reader holds no connection.
func (redisLock) Close() {}

// lockValue is the value that holds the lock at key: the primary's (single, replicas,
// sentinel), the value on the primary that serves its slot (cluster), or the value a
// majority of the instances hold (redlock); false when there is none.
func (r *Redis) lockValue(ctx context.Context, key string) (string, bool, error) {
	if r.cfg.Topology == RedisCluster {
		in, err := r.home(ctx, key)
		if err != nil {
			return "", false, err
		}
		return r.get(ctx, in, key)
	}
	if r.cfg.Topology != RedisRedlock {
		primary := 1
		if id, ok := r.Leader(ctx); ok {
			primary = id
		}
		return r.get(ctx, r.Instances[primary-1], key)
	}
	values := make([]*string, len(r.Instances))
	var wg sync.WaitGroup
	for i, in := range r.Instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, ok, err := r.get(ctx, in, key); err == nil && ok {
				values[i] = &v
			}
		}()
	}
	wg.Wait()
	v, ok := majorityValue(values)
	return v, ok, nil
}

// majorityValue is the value more than half of values hold (nil: none there).
func majorityValue(values []*string) (string, bool) {
	count := map[string]int{}
	for _, v := range values {
		if v != nil {
			count[*v]++
		}
	}
	for v, n := range count {
		if 2*n > len(values) {
			return v, true
		}
	}
	return "", false
}

// lockValueScript reads a lock's key as the harness reads it: a string's value, or
// the one field of a hash (Redisson's layout, {id:threadId: count}); nil when the
// key does not exist or holds anything else (a hash of several fields: a reentrant
// lock's readers and writers, not one holder).
const lockValueScript = `local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then return redis.call('GET', KEYS[1]) end
if t == 'hash' then
  local f = redis.call('HKEYS', KEYS[1])
  if #f == 1 then return f[1] end
end
return false`

// get reads key on one instance (lockValueScript's value); false when it holds none.
func (r *Redis) get(ctx context.Context, in *lockservice.Member, key string) (string, bool, error) {
	v, err := r.do(ctx, in, "EVAL", lockValueScript, "1", key)
	if err != nil {
		return "", false, fmt.Errorf("redis instance %d: read %s: %w", in.ID, key, err)
	}
	if v == nil {
		return "", false, nil
	}
	s, err := replyString(v)
	return s, err == nil, err
}

// KillSession ends the client whose CLIENT ID is session on instance server (CLIENT
// KILL ID) and returns Redis's count of the clients it killed (0: none had that id).
func (r *Redis) KillSession(ctx context.Context, server int, session string) (int, error) {
	id, ok := lockservice.ParseSession(session)
	if !ok {
		return 0, fmt.Errorf("redis: kill session %q: not a session id (0x<hex>)", session)
	}
	v, err := r.Command(ctx, server, "CLIENT", "KILL", "ID", strconv.FormatUint(id, 10))
	if err != nil {
		return 0, fmt.Errorf("redis: kill session %s on instance %d: %w", session, server, err)
	}
	n, err := replyInt(v)
	if err != nil {
		return 0, fmt.Errorf("redis: kill session %s on instance %d: %w", session, server, err)
	}
	return int(n), nil
}
