package redis

import (
	"context"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
)

func TestKillSessionRedis(t *testing.T) {
	dir := t.TempDir()
	net := redisNet(t, dir)
	ctx := context.Background()
	r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisSingle}, Dir: dir})
	if r != nil {
		defer r.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	conn, err := r.Dial(ctx, r.Instances[0].ClientAddr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := newRespConn(conn)
	out, err := rc.pipeline([]string{"CLIENT", "ID"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := replyInt(out[0])
	if err != nil {
		t.Fatal(err)
	}
	s := lockservice.SessionName(uint64(id))
	if _, err := rc.pipeline([]string{"SET", "/zlc/kill", s + ":c0ffee", "PX", "60000", "NX"}); err != nil {
		t.Fatal(err)
	}
	lockservicetest.CheckLive(t, r.LiveSessions(ctx), s)
	if n, err := r.KillSession(ctx, 1, s); err != nil || n != 1 {
		t.Fatalf("KillSession(%s) = %d, %v; want 1", s, n, err)
	}
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.pipeline([]string{"PING"}); err == nil {
		t.Error("the killed client still answers")
	}
	lockservicetest.WaitLive(t, r.LiveSessions, s, false)
	if n, err := r.KillSession(ctx, 1, s); err != nil || n != 0 {
		t.Errorf("KillSession of a gone client = %d, %v; want 0", n, err)
	}
	if _, err := r.KillSession(ctx, 2, s); err == nil {
		t.Error("KillSession on an instance that does not exist succeeded")
	}
}
