package models

import (
	"bytes"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

// The etcd history from Knossos's data/mutex/bad: Knossos finds it not
// linearizable under its owner-less mutex model.
const etcdHistory = "testdata/knossos-mutex-bad-etcd.edn"

func TestKnossosEtcdHistory(t *testing.T) {
	h, err := histories.LoadEDN(etcdHistory)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Kind: KnossosMutex}
	res, err := Check(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Invalid || len(res.Keys) != 1 {
		t.Fatalf("verdict %s, keys %+v", res.Verdict, res.Keys)
	}
	kr := res.Keys[0]
	t.Logf("%s, first violation at %d, window of %d ops: %s", kr.Verdict, kr.FirstViolation, len(kr.Window), kr.Witness)
	if kr.Checker != CheckerPorcupine || kr.FirstViolation <= 0 || len(kr.Window) == 0 ||
		!strings.Contains(kr.Witness, "Knossos's owner-less mutex") {
		t.Errorf("key result %+v", kr)
	}
	if r := windowIllegal(t, kr, cfg); r != porcupine.Illegal {
		t.Errorf("window is %s, want Illegal", r)
	}
	var buf bytes.Buffer
	if err := WriteVisualization(&buf, res, cfg); err != nil || !strings.Contains(buf.String(), "<html") {
		t.Errorf("visualization: %v, %d bytes", err, buf.Len())
	}

	// Under the owner-aware mutex the same history is linearizable: the
	// release that process 3 invoked at 29.589s failed (its etcd lease was
	// gone), and a failed release ends its process's hold, so process 0's
	// acquire at 32.085s is no double grant. Knossos drops failed ops, so
	// for it process 3 still held the lock. Porcupine's owner-aware model
	// agrees with the holds checker.
	cfg = Config{Kind: Mutex}
	res, err = Check(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Valid || porcupineVerdict(t, h, cfg) != Valid {
		t.Errorf("owner-aware mutex: holds checker %s, porcupine %s; %+v", res.Verdict, porcupineVerdict(t, h, cfg), res.Keys)
	}
}
