package harness

import (
	"crypto/rand"
	"encoding/hex"
)

// randomID returns 6 random hex digits, to tell runs apart on the host.
func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
