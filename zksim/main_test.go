package zksim

import (
	"os"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
)

func TestMain(m *testing.M) {
	simsched.TuneGC()
	os.Exit(m.Run())
}
