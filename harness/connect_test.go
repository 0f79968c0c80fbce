package harness

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

func connectConfig(connect, chroot string, classes ...nemesis.Class) Config {
	c := Config{Connect: connect, Chroot: chroot, Nemesis: classes, WorkerArgv: []string{"w"}}.Defaults()
	c.Recipe = "gozk"
	return c
}

func TestConnectValidation(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // "" means valid
	}{
		{connectConfig("10.1.2.3:2181,zk2:2182,zk3", "", nemesis.ClassClientPause, nemesis.ClassClientKill), ""},
		{connectConfig("10.1.2.3", "/team/zlc", nemesis.ClassSessionExpire, nemesis.ClassReplyLoss), ""},
		{connectConfig("10.1.2.3:2181", "", nemesis.ClassKill), "does not manage them"},
		{connectConfig("10.1.2.3:2181", "", nemesis.ClassPartition, nemesis.ClassPacket), "does not manage them"},
		{connectConfig("10.1.2.3:2181,zk2:2182", "", nemesis.ClassClientServerPartition), ""}, // made on the workers' side
		{connectConfig("10.1.2.3:2182", "", nemesis.ClassSessionExpire), "client port to be 2181"},
		{connectConfig("127.0.0.1:2181", ""), "loopback"},
		{connectConfig("localhost:2181", ""), "loopback"},
		{connectConfig("10.1.2.3:2181,", ""), "empty address"},
		{connectConfig("10.1.2.3:99999", ""), "bad port"},
		{connectConfig("10.1.2.3", "relative"), "chroot"},
		{connectConfig("10.1.2.3", "/a//b"), "chroot"},
		{connectConfig("10.1.2.3", "/"), "chroot"},
		{connectConfig("10.1.2.3", "/zookeeper/quota"), "ZooKeeper's own"},
		{connectConfig("", "/x"), "only for a run against an existing ensemble"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("connect %q chroot %q %v: %v", c.cfg.Connect, c.cfg.Chroot, c.cfg.Nemesis, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("connect %q chroot %q %v: got %v, want an error with %q", c.cfg.Connect, c.cfg.Chroot, c.cfg.Nemesis, err, c.want)
		}
	}
}

func TestConnectLockPathIsUnderTheChroot(t *testing.T) {
	own := Config{RunID: "ab12cd"}.Defaults().named()
	if got := own.lockPath(); !strings.HasPrefix(got, "/zlc/ab12cd/") {
		t.Errorf("own ensemble: lock path %q", got)
	}
	c := Config{RunID: "ab12cd", Connect: "10.1.2.3"}.Defaults().named()
	if c.Chroot != "/zlockcheck/ab12cd" || !strings.HasPrefix(c.lockPath(), c.Chroot+"/") {
		t.Errorf("connect: chroot %q, lock path %q", c.Chroot, c.lockPath())
	}
	c = Config{RunID: "ab12cd", Connect: "10.1.2.3", Chroot: "/team/x"}.Defaults().named()
	if c.Chroot != "/team/x" || !strings.HasPrefix(c.lockPath(), "/team/x/") {
		t.Errorf("connect with a chroot: chroot %q, lock path %q", c.Chroot, c.lockPath())
	}
}
