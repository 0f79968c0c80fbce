package lockservice_test

import (
	"context"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	_ "github.com/zlockcheck/zlockcheck/lockservice/redis"
	_ "github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	_ "github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

// TestEveryKindStarts: every kind of the catalogue has a way to start its servers
// once its package is linked, and a kind nobody registered is refused by name.
func TestEveryKindStarts(t *testing.T) {
	for _, k := range kind.All() {
		if !lockservice.Registered(k.Name) {
			t.Errorf("kind %s: no start registered (lockservice.RegisterStart)", k.Name)
		}
	}
	if lockservice.Registered("etcd") {
		t.Error("etcd has a start nobody registered")
	}
	if _, err := lockservice.Start(context.Background(), nil, lockservice.Config{Kind: "etcd"}, ""); err == nil || !strings.Contains(err.Error(), `want zookeeper, redis, postgres or mariadb, got "etcd"`) {
		t.Errorf("Start(etcd): %v", err)
	}
}
