package models

import (
	"math"
	"testing"
	"time"
	"github.com/anishathalye/porcupine"
	"github.com/zlockcheck/zlockcheck/histories"
)

func TestZZEDN2(t *testing.T) {
	h, _ := histories.LoadEDN("testdata/knossos-mutex-bad-etcd.edn")
	p, err := parse(h, KnossosMutex)
	if err != nil { t.Fatal(err) }
	m := newLockModel(KnossosMutex, 1)
	pops := toPops(p, 0, KnossosMutex)
	T := int64(32085029300)
	var rets []int64
	for _, o := range pops { if o.retT != never && o.retT <= T { rets = append(rets, o.retT) } }
	n := 0
	for i := len(rets)-1; i >= 0 && n < 400; i -= 5 {
		n+=5
		ops := window(p, pops, rets[i], T, true)
		r := porcupine.CheckOperationsTimeout(m.porcupineModel(initAny), ops, time.Second)
		if r == porcupine.Illegal { t.Logf("S=%d nops=%d %s", rets[i], len(ops), r) }
	}
	ops := window(p, pops, math.MinInt64, T, false)
	t.Log(porcupine.CheckOperationsTimeout(m.porcupineModel(initFree), ops, time.Second))
	ops = window(p, pops, math.MinInt64, T, true)
	t.Log(porcupine.CheckOperationsTimeout(m.porcupineModel(initAny), ops, time.Second))
}
