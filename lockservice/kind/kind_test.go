package kind

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"zookeeper", "redis", "postgres", "mariadb", "etcd"} {
		if n, err := Parse(s); err != nil || string(n) != s {
			t.Errorf("Parse(%q) = %q, %v", s, n, err)
		}
	}
	for _, s := range []string{"", "mysql", "ZooKeeper"} {
		_, err := Parse(s)
		if err == nil || !strings.Contains(err.Error(), "want zookeeper, redis, postgres, mariadb or etcd") {
			t.Errorf("Parse(%q): %v, want the list of kinds", s, err)
		}
	}
}

func TestOf(t *testing.T) {
	cases := []struct {
		n            Name
		title        string
		queue, lease bool
	}{
		{"", "ZooKeeper", true, false},
		{ZooKeeper, "ZooKeeper", true, false},
		{Redis, "Redis", false, true},
		{Postgres, "PostgreSQL", false, true},
		{MariaDB, "MariaDB", false, true},
		{Etcd, "etcd", true, true},
		{"consul", "consul", false, false}, // a run stored by a tool that knew it
	}
	for _, c := range cases {
		k := Of(c.n)
		if k.Title != c.title || k.Queue != c.queue || k.Lease != c.lease {
			t.Errorf("Of(%q) = %+v, want title %q, queue %v, lease %v", c.n, k, c.title, c.queue, c.lease)
		}
	}
	if _, ok := Lookup("consul"); ok {
		t.Error("Lookup(consul): found a kind nobody registered")
	}
}

func TestRefuse(t *testing.T) {
	cases := []struct {
		n    Name
		a    Ability
		want string // "" when the kind can
	}{
		{ZooKeeper, ExpireSession, ""},
		{ZooKeeper, 0, ""},
		{ZooKeeper, KillConnection, "--service redis, postgres, mariadb); ZooKeeper cannot"},
		{ZooKeeper, JumpClock, "--service redis); ZooKeeper cannot"},
		{Redis, JumpClock, ""},
		{Redis, ExpireSession, "has no sessions to expire"},
		{Postgres, Failover, ""},
		{Postgres, JumpClock, "PostgreSQL cannot"},
		{MariaDB, Failover, "nothing to fail over to"},
	}
	for _, c := range cases {
		err := Of(c.n).Refuse(c.a)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s refuses %s: %v", c.n, c.a, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s, %s: %v, want %q", c.n, c.a, err, c.want)
		}
	}
}

func TestRegisterRefusesTwice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second Register of redis did not panic")
		}
	}()
	Register(Kind{Name: Redis, Title: "Redis"})
}
