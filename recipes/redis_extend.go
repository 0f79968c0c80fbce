package recipes

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
)

// The extend scripts. KEYS[1] is the lock key; ARGV[1] the holder's value, ARGV[2]
// the TTL in milliseconds. Each returns 1 when the key is the holder's with a fresh
// TTL, else 0.
var (
	// redisExtendScript resets the key's TTL if it still holds ARGV[1].
	redisExtendScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)
	// redisBlindExtendScript (mutant-redis-blind-extend) resets the key's TTL
	// whoever holds it: 1 when there is a key, as PEXPIRE answers.
	redisBlindExtendScript = redis.NewScript(`return redis.call("PEXPIRE", KEYS[1], ARGV[2])`)
	// redisExtendRecreateScript (mutant-redis-extend-recreates) also sets the key
	// again when it is missing: a key the server lost, or one that expired and was
	// held and released by another client meanwhile, comes back as the holder's.
	redisExtendRecreateScript = redis.NewScript(`local v = redis.call("GET", KEYS[1])
if v == ARGV[1] or not v then
	redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
	return 1
end
return 0`)
)

// extender keeps a held Redis lock alive: every third of the TTL it runs an extend
// script and, when the key is still the holder's, moves the lease's validity to the
// extend's start plus the TTL less the drift allowance. An extend that finds the key
// gone or another's reports lost (with report); one whose outcome is unknown leaves
// the validity as it was, so the lease reports lost when it runs out.
type extender struct {
	stop chan struct{}
	done chan struct{}
}

// extendSpec is what one hold's extender needs.
type extendSpec struct {
	client redis.Scripter
	script *redis.Script
	key    string
	value  string
	ttl    time.Duration
	io     time.Duration // one extend's timeout
	lease  *lease
	gen    uint64 // the hold's generation in lease
	report bool   // report lost when an extend finds the key not the holder's
	log    *log.Logger
}

// startExtender starts s's extender; stop it before releasing.
func startExtender(s extendSpec) *extender {
	e := &extender{stop: make(chan struct{}), done: make(chan struct{})}
	go e.loop(s)
	return e
}

// halt stops the extender and waits until no extend is in flight (an extend's
// outcome after a release must not report lost). Nil-safe.
func (e *extender) halt() {
	if e == nil {
		return
	}
	close(e.stop)
	<-e.done
}

func (e *extender) loop(s extendSpec) {
	defer close(e.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-e.stop
		cancel()
	}()
	t := time.NewTimer(s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		if !s.lease.holding() {
			return
		}
		start := time.Now()
		if !s.once(ctx, start) {
			return
		}
		t.Reset(s.ttl / 3)
	}
}

// once runs one extend begun at start; false when the hold is over.
func (s extendSpec) once(ctx context.Context, start time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, s.io)
	defer cancel()
	n, err := s.script.Run(ctx, s.client, []string{s.key}, s.value, s.ttl.Milliseconds()).Int64()
	switch {
	case err != nil:
		s.log.Printf("extend: %v (the validity stays as it was)", err)
		return true
	case n == 0:
		if s.report {
			s.lease.lose(s.gen, "extend: the key no longer holds this worker's value")
		}
		return !s.report
	}
	return s.lease.extend(s.gen, start.Add(s.ttl-redisDrift(s.ttl)))
}
