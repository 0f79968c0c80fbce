package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// fakeCounterRecipe is a fake, for testing Serve's counter ops: a fakeRecipe with an
// in-memory counter; a write of a negative value fails as fenced.
type fakeCounterRecipe struct {
	fakeRecipe
	cmu   sync.Mutex
	value int64
	// lossesLeft: that many writes of a value above 1000 lose their connection
	// before one goes through (-1: every one does).
	lossesLeft int
	writes     int
}

var _ Counter = (*fakeCounterRecipe)(nil)

func (f *fakeCounterRecipe) Read(ctx context.Context) (int64, error) {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	return f.value, nil
}

func (f *fakeCounterRecipe) Write(ctx context.Context, v int64) error {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.writes++
	if v < 0 || (v == 3000 && f.writes > 1) {
		return Fail(ErrFenced)
	}
	if v > 1000 && f.lossesLeft != 0 {
		f.lossesLeft--
		return errors.New("connection loss")
	}
	f.value = v
	return nil
}

const counterInit = `{"id":0,"op":"init","connect":"h:1","session_timeout_ms":4000,"path":"/zlc/run/l0","kind":"counter","counter_path":"/zlc/run/counter","fenced":true,"worker":2}`

func TestServeCounterOps(t *testing.T) {
	var built *fakeCounterRecipe
	newRecipe := func(ctx context.Context, cfg Config) (Recipe, error) {
		built = &fakeCounterRecipe{fakeRecipe: fakeRecipe{cfg: cfg}, lossesLeft: -1}
		return built, nil
	}
	w := startWorker(t, context.Background(), ServeConfig{New: newRecipe})
	w.send(counterInit)
	w.expectReply(0, "ok", "")
	if built.cfg.CounterPath != "/zlc/run/counter" || !built.cfg.Fenced || built.cfg.Kind != workloads.Counter {
		t.Errorf("config = %+v", built.cfg)
	}
	w.send(`{"id":1,"op":"read"}`)
	if m := w.expectReply(1, "ok", ""); m.Value == nil || *m.Value != 0 {
		t.Fatalf("read reply value %v, want 0", m.Value)
	}
	w.send(`{"id":2,"op":"write","value":41}`)
	if m := w.expectReply(2, "ok", ""); m.Value != nil {
		t.Errorf("write reply carries value %d", *m.Value)
	}
	w.send(`{"id":3,"op":"read"}`)
	if m := w.expectReply(3, "ok", ""); m.Value == nil || *m.Value != 41 {
		t.Fatalf("read reply value %v, want 41", m.Value)
	}
	w.send(`{"id":4,"op":"write","value":-1}`)
	w.expectReply(4, "fail", "fenced: lock node gone")
	w.send(`{"id":5,"op":"write","value":2000}`)
	w.expectReply(5, "info", "connection loss")
	w.send(`{"id":6,"op":"close"}`)
	w.expectReply(6, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeCounterOpsUnsupported(t *testing.T) {
	ff := &fakeFactory{}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"read"}`)
	if m := w.expectReply(1, "fail", "recipe does not support the counter workload"); m.Value != nil {
		t.Error("a failed read carries a value")
	}
	w.send(`{"id":2,"op":"write","value":1}`)
	w.expectReply(2, "fail", "recipe does not support the counter workload")
	w.send(`{"id":3,"op":"close"}`)
	w.expectReply(3, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeFencedInitNeedsCounter(t *testing.T) {
	ff := &fakeFactory{}
	w := startWorker(t, context.Background(), ServeConfig{New: ff.New})
	w.send(counterInit)
	w.expectReply(0, "fail", "recipe cannot fence: recipe does not support the counter workload")
	if n := ff.last(t).closeCount(); n != 1 {
		t.Errorf("the refused recipe was closed %d times, want 1", n)
	}
	// Unfenced, the same recipe starts (its read and write then fail).
	w.send(strings.Replace(strings.Replace(counterInit, `"fenced":true,`, "", 1), `"id":0`, `"id":1`, 1))
	w.expectReply(1, "ok", "")
	w.send(`{"id":2,"op":"close"}`)
	w.expectReply(2, "ok", "")
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeValidatesCounterPath(t *testing.T) {
	w := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New})
	w.send(strings.Replace(counterInit, `"/zlc/run/counter"`, `"counter"`, 1))
	w.expectReply(0, "fail", `init: counter_path must be an absolute znode path, got "counter"`)
	w.stdin.Close()
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServeWriteWithoutValueIsMalformed(t *testing.T) {
	w := startWorker(t, context.Background(), ServeConfig{New: (&fakeFactory{}).New})
	w.send(initLine)
	w.expectReply(0, "ok", "")
	w.send(`{"id":1,"op":"write"}`)
	if err := w.wait(); err == nil {
		t.Fatal("Serve = nil, want a malformed-request error")
	}
}

func TestServeZLCRejectsOtherKinds(t *testing.T) {
	for _, name := range []string{"zlc-mutex", "mutant-off-by-one"} {
		w := startWorker(t, context.Background(), ServeConfig{Recipe: name})
		w.send(strings.Replace(initLine, `"kind":"mutex"`, `"kind":"semaphore"`, 1))
		w.expectReply(0, "fail", "recipe "+name+" does not support kind semaphore")
		w.send(strings.Replace(counterInit, `"counter_path":"/zlc/run/counter",`, "", 1))
		w.expectReply(0, "fail", "recipe "+name+": kind counter needs a counter path")
		w.send(`{"id":1,"op":"close"}`)
		w.expectReply(1, "ok", "")
		if err := w.wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// A write whose outcome is unknown is retried for write_retry_ms: it answers ok once
// an attempt goes through, info when none does in time, and fail at once.
func TestServeRetriesUnknownWrites(t *testing.T) {
	for _, c := range []struct {
		name       string
		retryMS    int
		losses     int
		value      string
		wantReply  string
		wantMsg    string
		wantWrites int
	}{
		{"no retry asked", 0, 2, "2000", "info", "connection loss", 1},
		{"recovers", 5000, 2, "2000", "ok", "", 3},
		{"gives up", 300, -1, "2000", "info", "connection loss", 3},
		{"definite failure is not retried", 5000, -1, "-1", "fail", "fenced: lock node gone", 1},
		// The first attempt may have been applied: a later fenced failure is no proof
		// that the write did not happen.
		{"fail after an unknown attempt is info", 5000, -1, "3000", "info", "fenced: lock node gone (after 1 attempts whose outcome is unknown)", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var built *fakeCounterRecipe
			newRecipe := func(ctx context.Context, cfg Config) (Recipe, error) {
				built = &fakeCounterRecipe{fakeRecipe: fakeRecipe{cfg: cfg}, lossesLeft: c.losses}
				return built, nil
			}
			w := startWorker(t, context.Background(), ServeConfig{New: newRecipe})
			w.send(strings.Replace(counterInit, `"worker":2`, fmt.Sprintf(`"worker":2,"write_retry_ms":%d`, c.retryMS), 1))
			w.expectReply(0, "ok", "")
			w.send(`{"id":1,"op":"write","value":` + c.value + `}`)
			w.expectReply(1, c.wantReply, c.wantMsg)
			w.send(`{"id":2,"op":"close"}`)
			w.expectReply(2, "ok", "")
			if err := w.wait(); err != nil {
				t.Fatal(err)
			}
			built.cmu.Lock()
			defer built.cmu.Unlock()
			if c.name == "gives up" {
				// 300 ms of 100 ms pauses: the attempts at 0, 100 and 200 ms (or fewer
				// on a slow machine, never more).
				if built.writes < 1 || built.writes > c.wantWrites {
					t.Errorf("%d attempts, want 1 to %d", built.writes, c.wantWrites)
				}
				return
			}
			if built.writes != c.wantWrites {
				t.Errorf("%d attempts, want %d", built.writes, c.wantWrites)
			}
		})
	}
}

// TestServeSentinelMasterNeedsASentinelMode: an init that names sentinels reaches only
// a catalogue recipe whose entry has Sentinel (with the name and the sentinels in its
// Config); any other recipe fails the init, naming it (a fake recipe stands in for
// the real constructors).
func TestServeSentinelMasterNeedsASentinelMode(t *testing.T) {
	line := strings.Replace(initLine, `"connect":"h1:2181,h2:2181"`, `"connect":"s1:26379,s2:26379","sentinel_master":"zlc-primary"`, 1)
	for _, c := range []struct {
		recipe string
		reply  string
		err    string
	}{
		{"redis-lock", "ok", ""},
		{"redislock", "ok", ""},
		{"redsync", "ok", ""},
		{"mutant-redlock-minority", "fail", "init: sentinel_master \"zlc-primary\": recipe mutant-redlock-minority has no Sentinel mode here (connect would name sentinels, not Redis instances)"},
		{"gozk", "fail", "init: sentinel_master \"zlc-primary\": recipe gozk has no Sentinel mode here (connect would name sentinels, not Redis instances)"},
	} {
		var got Config
		ff := &fakeFactory{onInit: func(cfg Config) error { got = cfg; return nil }}
		w := startWorker(t, context.Background(), ServeConfig{Recipe: c.recipe, New: ff.New})
		w.send(line)
		w.expectReply(0, c.reply, c.err)
		w.stdin.Close()
		if err := w.wait(); err != nil {
			t.Fatal(err)
		}
		if c.reply == "ok" && (got.SentinelMaster != "zlc-primary" || strings.Join(got.Servers, ",") != "s1:26379,s2:26379") {
			t.Errorf("%s: Config has sentinel master %q, servers %v", c.recipe, got.SentinelMaster, got.Servers)
		}
	}
}

// TestServeRedisClusterNeedsAClusterMode: an init that names a Redis Cluster reaches
// only a catalogue recipe whose entry has Cluster (with every instance and the flag
// in its Config); any other recipe, and a cluster with sentinels, fails the init,
// naming why (a fake recipe stands in for the real constructors).
func TestServeRedisClusterNeedsAClusterMode(t *testing.T) {
	cluster := strings.Replace(initLine, `"connect":"h1:2181,h2:2181"`, `"connect":"10.77.1.1:6379,10.77.1.2:6379","redis_cluster":true`, 1)
	both := strings.Replace(cluster, `"redis_cluster":true`, `"redis_cluster":true,"sentinel_master":"zlc-primary"`, 1)
	for _, c := range []struct {
		recipe, line string
		reply        string
		err          string
	}{
		{"redis-lock", cluster, "ok", ""},
		{"redislock", cluster, "ok", ""},
		{"mutant-redis-blind-del", cluster, "ok", ""},
		{"redis-lock-wait", cluster, "ok", ""},
		{"redsync", cluster, "ok", ""},
		{"redisson-redlock", cluster, "fail", "init: redis_cluster: recipe redisson-redlock has no Redis Cluster mode here (connect names a cluster's instances, each serving some slots)"},
		{"gozk", cluster, "fail", "init: redis_cluster: recipe gozk has no Redis Cluster mode here (connect names a cluster's instances, each serving some slots)"},
		{"redis-lock", both, "fail", "init: redis_cluster and sentinel_master: a Redis Cluster has no sentinels"},
	} {
		var got Config
		ff := &fakeFactory{onInit: func(cfg Config) error { got = cfg; return nil }}
		w := startWorker(t, context.Background(), ServeConfig{Recipe: c.recipe, New: ff.New})
		w.send(c.line)
		w.expectReply(0, c.reply, c.err)
		w.stdin.Close()
		if err := w.wait(); err != nil {
			t.Fatal(err)
		}
		if c.reply == "ok" && (!got.RedisCluster || strings.Join(got.Servers, ",") != "10.77.1.1:6379,10.77.1.2:6379") {
			t.Errorf("%s: Config has cluster %v, servers %v", c.recipe, got.RedisCluster, got.Servers)
		}
	}
}
