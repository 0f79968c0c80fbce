package models

import (
	"testing"
	"github.com/zlockcheck/zlockcheck/histories"
)

func TestZZEDN(t *testing.T) {
	h, err := histories.LoadEDN("testdata/knossos-mutex-bad-etcd.edn")
	if err != nil { t.Fatal(err) }
	for _, k := range []Kind{KnossosMutex} {
	r, err := Check(h, Config{Kind: k})
	if err != nil { t.Fatal(err) }
	t.Logf("%s %s %v", k, r.Verdict, r.Duration)
	for _, kr := range r.Keys { t.Logf("%+v", kr.Witness); t.Logf("window %d first %d", len(kr.Window), kr.FirstViolation)
	for _, op := range kr.Window { t.Logf("%d %s %s p%v t=%d %s", op.Index, op.Type, op.F, op.Process, op.Time, op.Error) } }
	}
}
