package zlcmutex

import (
	"strings"
	"testing"
)

// FuzzParseCounter checks that ParseCounter never panics, and that a value it
// accepts is the decimal the data holds: FormatCounter writes it back, and reading
// that gives it again.
func FuzzParseCounter(f *testing.F) {
	for _, s := range []string{"", "0", " 42\n", "-7", "+3", "007", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "1e3", "0x10", "4 2", "\t\r\n", "١٢"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseCounter(data)
		if err != nil {
			return
		}
		if strings.TrimSpace(string(data)) == "" && v != 0 {
			t.Fatalf("%q: empty data read as %d", data, v)
		}
		back, err := ParseCounter(FormatCounter(v))
		if err != nil || back != v {
			t.Fatalf("%q read as %d, written as %q, read back as %d (%v)", data, v, FormatCounter(v), back, err)
		}
	})
}
