package redsim

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/zlockcheck/zlockcheck/internal/simsched"
)

// quietLogger discards go-redis's own log lines (a crashed client's failed
// dials, say), which would fill the test's output.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	simsched.TuneGC()
	os.Exit(m.Run())
}
