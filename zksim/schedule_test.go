package zksim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule("# a comment\n\nclients 3\nacquire c0\n  tick \nexpire c2\nlose-reply c1\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "clients 3\nacquire c0\ntick\nexpire c2\nlose-reply c1\n"
	if s.String() != want {
		t.Fatalf("got %q, want %q", s.String(), want)
	}
	for _, bad := range []string{
		"",
		"acquire c0\n",
		"clients 2\nclients 2\n",
		"clients 0\n",
		"clients 17\n",
		"clients 2\nacquire c2\n",
		"clients 2\nacquire\n",
		"clients 2\nacquire c\n",
		"clients 2\nacquire c01\n",
		"clients 2\nacquire c-1\n",
		"clients 2\nacquire c0 c1\n",
		"clients 2\ntick c0\n",
		"clients 2\njump c0\n",
		"clients 2\nacquire c0\nclients 3\n",
	} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseSchedule checks that ParseSchedule never panics and that what it accepts
// reads back the same from its String.
func FuzzParseSchedule(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "schedules", "*.txt"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add("clients 1\ntick\n")
	f.Add("clients 2\nacquire c1\r\nrun c0 \n#x\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSchedule(text)
		if err != nil {
			return
		}
		again, err := ParseSchedule(s.String())
		if err != nil || again.String() != s.String() {
			t.Fatalf("%q read back as %q (%v)", s.String(), again.String(), err)
		}
		for _, st := range s.Steps {
			if strings.ContainsAny(st.String(), "\n\r") {
				t.Fatalf("step %q spans lines", st.String())
			}
		}
	})
}
