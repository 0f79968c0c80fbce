package recipes

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// redisRecipeCase is one of the Redis recipes, for the tests they all pass.
type redisRecipeCase struct {
	name    string
	new     Constructor
	servers int
	// token: the recipe's grants carry a fencing token.
	token bool
}

var redisRecipeCases = []redisRecipeCase{
	{"redis-lock", NewRedisLock, 1, true},
	{"redislock", NewRedislock, 1, false},
	{"redsync", NewRedsync, 3, false},
}

// forEachRedisRecipe runs test for each Redis recipe on fresh servers.
func forEachRedisRecipe(t *testing.T, test func(t *testing.T, c redisRecipeCase, servers []*redisServer, addrs []string)) {
	for _, c := range redisRecipeCases {
		t.Run(c.name, func(t *testing.T) {
			servers, addrs := startRedises(t, c.servers)
			test(t, c, servers, addrs)
		})
	}
}

func TestRedisRecipesExclude(t *testing.T) {
	forEachRedisRecipe(t, func(t *testing.T, c redisRecipeCase, _ []*redisServer, addrs []string) {
		key := testRedisKey(t)
		a, _ := newTestRedisRecipe(t, c.new, addrs, key, 5*time.Second, 1)
		b, _ := newTestRedisRecipe(t, c.new, addrs, key, 5*time.Second, 2)
		ga := mustAcquire(t, a, "a")
		expectTimeout(t, b, "b while a holds")
		mustRelease(t, a, "a")
		gb := mustAcquire(t, b, "b after a released")
		if c.token {
			if token(t, gb) <= token(t, ga) {
				t.Errorf("tokens %s then %s, want increasing", ga.Token, gb.Token)
			}
		} else if ga.Token != nil || gb.Token != nil {
			t.Errorf("tokens %s, %s, want none", ga.Token, gb.Token)
		}
		expectTimeout(t, a, "a while b holds")
		mustRelease(t, b, "b")
	})
}

// TestRedisRecipesContend: four workers, fifteen cycles each, never two holders;
// redis-lock's tokens increase in the order of the grants.
func TestRedisRecipesContend(t *testing.T) {
	forEachRedisRecipe(t, func(t *testing.T, c redisRecipeCase, _ []*redisServer, addrs []string) {
		key := testRedisKey(t)
		var holders atomic.Int32
		var mu sync.Mutex
		var tokens []int64
		var wg sync.WaitGroup
		for w := range 4 {
			r, _ := newTestRedisRecipe(t, c.new, addrs, key, 3*time.Second, w)
			wg.Go(func() {
				for range 15 {
					g, err := r.Acquire(context.Background(), AcquireRequest{Timeout: 10 * time.Second})
					if err != nil {
						t.Errorf("worker %d: acquire: %v", w, err)
						return
					}
					if n := holders.Add(1); n != 1 {
						t.Errorf("worker %d: %d holders", w, n)
					}
					if c.token {
						mu.Lock()
						tokens = append(tokens, token(t, g))
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
					holders.Add(-1)
					if err := r.Release(context.Background()); err != nil {
						t.Errorf("worker %d: release: %v", w, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if c.token && (len(tokens) != 60 || !strictlyIncreasing(tokens)) {
			t.Errorf("tokens in grant order %v, want 60 increasing", tokens)
		}
	})
}

func strictlyIncreasing(s []int64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

func TestRedisRecipesReleaseWhenNotHeld(t *testing.T) {
	forEachRedisRecipe(t, func(t *testing.T, c redisRecipeCase, servers []*redisServer, addrs []string) {
		key := testRedisKey(t)
		r, _ := newTestRedisRecipe(t, c.new, addrs, key, 5*time.Second, 1)
		expectOutcome(t, "release before any acquire", r.Release(context.Background()), workloads.ReplyFail, "not held")
		mustAcquire(t, r, "r")
		for _, s := range servers {
			s.do(t, "DEL", key)
		}
		err := r.Release(context.Background())
		if typ, msg := Classify(err); typ != workloads.ReplyFail || !strings.HasPrefix(msg, "not held") {
			t.Fatalf("release of a deleted key: %s %q, want fail not held", typ, msg)
		}
		expectOutcome(t, "second release", r.Release(context.Background()), workloads.ReplyFail, "not held")
	})
}

// TestRedisRecipesLostWhenValidityRunsOut: a holder that outlasts its TTL hears lost,
// not before its validity ran out, and its release then fails.
func TestRedisRecipesLostWhenValidityRunsOut(t *testing.T) {
	forEachRedisRecipe(t, func(t *testing.T, c redisRecipeCase, servers []*redisServer, addrs []string) {
		const ttl = 500 * time.Millisecond
		r, ev := newTestRedisRecipe(t, c.new, addrs, testRedisKey(t), ttl, 1)
		start := time.Now()
		mustAcquire(t, r, "r")
		for _, s := range servers { // no extend can succeed now
			s.stop(t)
		}
		reason := waitLost(t, ev, ttl+2*time.Second)
		held := time.Since(start)
		for _, s := range servers {
			s.cont(t)
		}
		if reason != "validity ran out" {
			t.Errorf("lost %q, want validity ran out", reason)
		}
		if held < ttl-redisDrift(ttl)-50*time.Millisecond || held > ttl+500*time.Millisecond {
			t.Errorf("lost after %v, want about %v", held, ttl-redisDrift(ttl))
		}
		expectOutcome(t, "release after lost", r.Release(context.Background()), workloads.ReplyFail, errValidityRanOut.Error())
		mustAcquire(t, r, "again after lost")
		mustRelease(t, r, "r")
		expectNoLost(t, ev, ttl)
	})
}

var valueShape = regexp.MustCompile(`^(0x[0-9a-f]+):[0-9a-f]{40}$`)

// TestRedisLockExtends: redis-lock held for several TTLs keeps its key (the extender
// resets its TTL every third of it, reporting each renewal) and reports no lost; the
// release finds its value.
func TestRedisLockExtends(t *testing.T) {
	s := startRedis(t)
	key := testRedisKey(t)
	const ttl = 300 * time.Millisecond
	r, ev := newTestRedisLock(t, redisCorrect, []string{s.addr}, key, ttl, 1)
	mustAcquire(t, r, "r")
	value := s.get(t, key)
	expectNoLost(t, ev, 4*ttl)
	if got, left := s.get(t, key), s.pttl(t, key); got != value || left <= 0 || left > ttl {
		t.Fatalf("after 4 TTLs the key is %q with %v left, want %q with at most %v", got, left, value, ttl)
	}
	ev.mu.Lock()
	renewed := ev.renewed
	ev.mu.Unlock()
	if renewed < 8 {
		t.Errorf("%d renewed events in 4 TTLs, want one per extend (every third of the TTL): about 12", renewed)
	}
	mustRelease(t, r, "r")
	if got := s.get(t, key); got != "" {
		t.Fatalf("after the release the key is %q", got)
	}
}

// TestRedisRecipesValueNamesTheSession: the key's value starts with the session id
// reported, which CLIENT LIST shows on the (first) instance; after the server kills
// that connection, the next acquire reports a new session and names it. RedLock's
// value is the same on every instance that holds it (a majority); with WithFailFast it
// may be granted before the first instance answers, so after the kill one warm-up
// cycles let that instance's new connection come up (until it has, the value names
// the old one: docs/recipes.md).
func TestRedisRecipesValueNamesTheSession(t *testing.T) {
	forEachRedisRecipe(t, func(t *testing.T, c redisRecipeCase, servers []*redisServer, addrs []string) {
		key := testRedisKey(t)
		r, ev := newTestRedisRecipe(t, c.new, addrs, key, 5*time.Second, 1)
		for round := range 2 {
			mustAcquire(t, r, "r")
			session := lastSession(t, ev)
			value, holders := heldValue(t, servers, key)
			if m := valueShape.FindStringSubmatch(value); m == nil || m[1] != session || holders < c.servers/2+1 {
				t.Fatalf("round %d: value %q on %d of %d servers, want %s:<40 hex digits> on a majority", round, value, holders, c.servers, session)
			}
			if !slices.Contains(servers[0].clientIDs(t), session) {
				t.Errorf("round %d: CLIENT LIST on %s lacks %s: %v", round, servers[0].addr, session, servers[0].clientIDs(t))
			}
			mustRelease(t, r, "r")
			if round == 0 {
				servers[0].do(t, "CLIENT", "KILL", "ID", strings.TrimPrefix(session, "0x"))
				if c.servers > 1 {
					warmUp(t, r, ev, servers[0])
				}
			}
		}
		if _, sessions := ev.counts(); sessions < 2 {
			t.Errorf("%d session events, want a new one after the kill", sessions)
		}
	})
}

// warmUp runs lock cycles until the last session reported is the first instance's
// live connection and a cycle reports no new one.
func warmUp(t *testing.T, r Recipe, ev *recordedEvents, first *redisServer) {
	t.Helper()
	for range 20 {
		_, before := ev.counts()
		mustAcquire(t, r, "warm-up")
		mustRelease(t, r, "warm-up")
		time.Sleep(10 * time.Millisecond)
		if _, after := ev.counts(); after == before && slices.Contains(first.clientIDs(t), lastSession(t, ev)) {
			return
		}
	}
	t.Fatal("the first instance's connection did not settle within 20 cycles")
}

// heldValue returns the value most servers hold for key, and how many hold it.
// (RedLock may leave another value on a minority: WithFailFast's unlock returns once
// a majority deleted, and the request to the last instance may be cut off.)
func heldValue(t *testing.T, servers []*redisServer, key string) (string, int) {
	t.Helper()
	count := map[string]int{}
	value := ""
	for _, s := range servers {
		if v := s.get(t, key); v != "" {
			count[v]++
			if count[v] > count[value] {
				value = v
			}
		}
	}
	return value, count[value]
}

// TestRedisRecipesUnknownOutcome: a majority of the servers stops for 1.5 request
// timeouts, then goes on (and runs what was sent meanwhile). redis-lock and redislock
// answer info: their request timed out, and it is not re-sent (with go-redis's
// default retries the re-sent SET NX would find the worker's own key, and the acquire
// would fail "timeout" while that key blocks everyone). redsync, which decides on the
// client, rides it out and locks.
func TestRedisRecipesUnknownOutcome(t *testing.T) {
	forEachRedisRecipe(t, func(t *testing.T, c redisRecipeCase, servers []*redisServer, addrs []string) {
		const ttl = 2 * time.Second
		r, _ := newTestRedisRecipe(t, c.new, addrs, testRedisKey(t), ttl, 1)
		stopped := servers[:c.servers/2+1]
		for _, s := range stopped {
			s.stop(t)
		}
		resumed := make(chan struct{})
		go func() {
			defer close(resumed)
			time.Sleep(redisIOTimeout(ttl) * 3 / 2)
			for _, s := range stopped {
				s.cont(t)
			}
		}()
		_, typ, msg := acquire(t, r, 3*time.Second)
		<-resumed
		want := workloads.ReplyInfo
		if c.servers > 1 {
			want = workloads.ReplyOK
		}
		if typ != want {
			t.Fatalf("acquire with %d of %d servers stopped a while: %s %q, want %s", len(stopped), c.servers, typ, msg, want)
		}
	})
}

func TestRedisRecipesRefuse(t *testing.T) {
	requireRedis(t)
	s := startRedis(t)
	for _, c := range redisRecipeCases {
		addrs := slices.Repeat([]string{s.addr}, c.servers)
		refuse := func(what string, cfg Config, want string) {
			t.Helper()
			cfg.SessionTimeout, cfg.Path, cfg.Events = time.Second, "/zlc-test/refuse/l0", newRecordedEvents()
			if cfg.Kind == "" {
				cfg.Kind = workloads.Mutex
			}
			r, err := c.new(context.Background(), cfg)
			if r != nil {
				r.Close()
			}
			if typ, msg := Classify(err); typ != workloads.ReplyFail || !strings.Contains(msg, want) {
				t.Errorf("%s, %s: %s %q, want fail %q", c.name, what, typ, msg, want)
			}
		}
		refuse("kind semaphore", Config{Servers: addrs, Kind: workloads.Semaphore}, "does not support kind semaphore")
		if c.name != "redis-lock" {
			refuse("kind counter", Config{Servers: addrs, Kind: workloads.Counter}, "does not support kind counter")
		}
		refuse("no server", Config{}, "no Redis address")
		if c.name != "redis-lock" {
			refuse("fenced", Config{Servers: addrs, Fenced: true}, c.name+" cannot fence: ")
		}
	}
	r, err := NewRedsync(context.Background(), Config{Servers: []string{s.addr, s.addr}, SessionTimeout: time.Second,
		Path: "/zlc-test/refuse/l0", Kind: workloads.Mutex})
	if typ, msg := Classify(err); r != nil || typ != workloads.ReplyFail || !strings.Contains(msg, "at least 3") {
		t.Errorf("redsync on 2 servers: %s %q, want fail naming 3", typ, msg)
	}
}

// TestRedisRedsyncWithOneInstanceDown: RedLock locks on a majority.
func TestRedisRedsyncWithOneInstanceDown(t *testing.T) {
	_, addrs := startRedises(t, 2)
	addrs = append(addrs, freeAddr(t))
	key := testRedisKey(t)
	a, _ := newTestRedisRecipe(t, NewRedsync, addrs, key, 2*time.Second, 1)
	b, _ := newTestRedisRecipe(t, NewRedsync, addrs, key, 2*time.Second, 2)
	mustAcquire(t, a, "a")
	expectTimeout(t, b, "b")
	mustRelease(t, a, "a")
	mustAcquire(t, b, "b")
	mustRelease(t, b, "b")
}

// TestRedisServe runs redis-lock as zlockcheck worker does: init names the first
// address (the second is ignored), the session event comes before init's reply, the
// acquire carries the token; and redislock, which has no token, refuses a fenced init.
func TestRedisServe(t *testing.T) {
	s := startRedis(t)
	init := `{"id":0,"op":"init","connect":"` + s.addr + `,` + freeAddr(t) + `","session_timeout_ms":4000,"path":"/zlc/run/l0","kind":"mutex","permits":1,"worker":3}`
	w := startWorker(t, context.Background(), ServeConfig{Recipe: "redislock"})
	w.send(strings.Replace(init, `"permits":1`, `"permits":1,"fenced":true`, 1))
	w.expectReply(0, "fail", "redislock cannot fence: the library gives no fencing token")
	w = startWorker(t, context.Background(), ServeConfig{Recipe: "redis-lock"})
	w.send(strings.Replace(init, `"id":0`, `"id":1`, 1))
	w.expectReply(1, "ok", "")
	w.send(`{"id":2,"op":"acquire","timeout_ms":1000}`)
	if m := w.expectReply(2, "ok", ""); string(m.Token) != "1" {
		t.Errorf("token %s, want 1", m.Token)
	}
	m := valueShape.FindStringSubmatch(s.get(t, "/zlc/run/l0"))
	if m == nil {
		t.Fatalf("value %q", s.get(t, "/zlc/run/l0"))
	}
	w.send(`{"id":3,"op":"release"}`)
	w.expectReply(3, "ok", "")
	w.send(`{"id":4,"op":"close"}`)
	w.expectReply(4, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
	var sessions []string
	for _, e := range w.events {
		if e.Event == workloads.EventSession {
			sessions = append(sessions, e.SessionID)
		}
	}
	if len(sessions) != 1 || sessions[0] != m[1] {
		t.Errorf("session events %v, want one, %s", sessions, m[1])
	}
}

// TestRedisRecipesLostReply: the reply to the acquire's script is lost (the
// connection closes after the server ran it). redis-lock and redislock answer info,
// and do not re-send (go-redis would by default: redis-lock's SET NX would then find
// its own key and the acquire would fail "timeout" while that key blocks everyone
// until the TTL); redis-lock deletes the key it may have set.
func TestRedisRecipesLostReply(t *testing.T) {
	for _, c := range redisRecipeCases[:2] {
		t.Run(c.name, func(t *testing.T) {
			s := startRedis(t)
			p := startDropProxy(t, s.addr)
			key := testRedisKey(t)
			r, _ := newTestRedisRecipe(t, c.new, []string{p.addr}, key, 5*time.Second, 1)
			mustAcquire(t, r, "warm-up (loads the script)")
			mustRelease(t, r, "warm-up")
			p.armed.Store(true)
			_, typ, msg := acquire(t, r, 2*time.Second)
			if typ != workloads.ReplyInfo {
				t.Fatalf("acquire whose reply was lost: %s %q, want info", typ, msg)
			}
			if c.name == "redis-lock" && s.get(t, key) != "" {
				t.Errorf("key %q left after the lost reply, want it cleaned up", s.get(t, key))
			}
		})
	}
}

// TestRedisRecipesInitWaits: a worker's init keeps trying to reach its instances (the
// primary; a majority for RedLock) for up to the session timeout, as a ZooKeeper client
// waits for its session: an instance that comes up a moment later is used, and when
// none does, init gives up after the session timeout with a plain error (info, not
// fail: the harness retries the slot), and at once when ctx ends.
func TestRedisRecipesInitWaits(t *testing.T) {
	requireRedis(t)
	const ttl = 2 * time.Second
	for _, c := range redisRecipeCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := func(addrs []string) Config {
				return Config{Servers: addrs, SessionTimeout: ttl, Path: testRedisKey(t), Kind: workloads.Mutex,
					Permits: 1, Worker: 1, Log: newTestLog(t), Events: newRecordedEvents()}
			}
			// Up a moment later: one instance listens from the start (RedLock's
			// minority), the one that makes the majority (or the primary) 500ms later.
			var addrs []string
			if c.servers > 1 {
				addrs = append(addrs, startRedis(t).addr)
			}
			late := freeAddr(t)
			addrs = append(addrs, late)
			for len(addrs) < c.servers {
				addrs = append(addrs, freeAddr(t))
			}
			started := make(chan error, 1)
			time.AfterFunc(500*time.Millisecond, func() {
				_, err := tryStartRedisAt(t, late)
				started <- err
			})
			begin := time.Now()
			r, err := c.new(context.Background(), cfg(addrs))
			took := time.Since(begin)
			if err := <-started; err != nil {
				t.Fatalf("starting the late redis-server: %v", err)
			}
			if err != nil {
				t.Fatalf("init with an instance up 500ms later: %v (after %s), want it to wait", err, took)
			}
			if took < 500*time.Millisecond {
				t.Errorf("init returned after %s, before the late instance was up", took)
			}
			mustAcquire(t, r, "after the wait")
			mustRelease(t, r, "after the wait")
			r.Close()

			// None comes: a plain error after the session timeout.
			none := slices.Repeat([]string{freeAddr(t)}, c.servers)
			if c.servers > 1 {
				none[0] = startRedis(t).addr
			}
			begin = time.Now()
			r, err = c.new(context.Background(), cfg(none))
			took = time.Since(begin)
			if r != nil {
				r.Close()
			}
			typ, msg := Classify(err)
			if err == nil || typ != workloads.ReplyInfo || !strings.Contains(msg, "gave up after") || !strings.Contains(msg, "connection refused") {
				t.Errorf("init with no instance coming: %s %q, want info naming the wait and connection refused", typ, msg)
			}
			if c.servers > 1 && !strings.Contains(msg, "reached 1 of 3 Redis instances, fewer than 2") {
				t.Errorf("RedLock init with a minority: %q, want it to say it reached 1 of 3", msg)
			}
			if took < ttl || took > ttl+2*time.Second {
				t.Errorf("init gave up after %s, want about the session timeout %s", took, ttl)
			}

			// ctx ends: init stops waiting.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			begin = time.Now()
			r, err = c.new(ctx, cfg(none))
			took = time.Since(begin)
			if r != nil {
				r.Close()
			}
			if typ, msg := Classify(err); err == nil || typ != workloads.ReplyInfo || took > time.Second {
				t.Errorf("init whose ctx ends after 300ms: %s %q after %s, want info within 1s", typ, msg, took)
			}
		})
	}
}
