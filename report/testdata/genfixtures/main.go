// Command genfixtures writes the small mutex histories of report's tests: valid.jsonl
// and invalid.jsonl (one planted double grant at about 11s). Both are 20 seconds of
// three contending processes with a partition from 5s to 9s (acquires time out, one
// release ends info and its process is replaced) and a pause from 13s that is never
// stopped. Run from the module root: go run ./report/testdata/genfixtures
package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"github.com/zlockcheck/zlockcheck/histories"
)

const ms = int64(1e6)

func main() {
	for _, invalid := range []bool{false, true} {
		name := "valid.jsonl"
		if invalid {
			name = "invalid.jsonl"
		}
		path := filepath.Join("report", "testdata", name)
		if err := write(path, generate(invalid)); err != nil {
			fmt.Fprintln(os.Stderr, "genfixtures:", err)
			os.Exit(1)
		}
	}
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func generate(invalid bool) histories.History {
	rng := rand.New(rand.NewPCG(7, 11))
	const end = 20000 * ms
	partStart, partStop := 5000*ms, 9000*ms
	inPartition := func(t int64) bool { return t >= partStart && t < partStop }
	var h histories.History
	add := func(o histories.Op) { h = append(h, o) }
	ready := []int64{180 * ms, 190 * ms, 205 * ms}
	ids := []int{0, 1, 2}
	nextID := 3
	var lockFree int64
	token := int64(100)
	crashed, doubled := false, false
	for {
		slot := 0
		for i := range ready {
			if ready[i] < ready[slot] {
				slot = i
			}
		}
		t := ready[slot]
		if t > end-400*ms {
			break
		}
		p := histories.Client(ids[slot])
		add(histories.Op{Type: histories.Invoke, F: histories.FAcquire, Process: p, Time: t, Key: "l0"})
		grant := max(t, lockFree) + 3*ms + rng.Int64N(4*ms)
		if invalid && !doubled && t > 11000*ms && lockFree-t > 60*ms {
			grant, doubled = t+4*ms, true // granted while another process holds the lock
		}
		if inPartition(grant) || grant-t > 1000*ms {
			at := t + 1000*ms
			add(histories.Op{Type: histories.Fail, F: histories.FAcquire, Process: p, Time: at, Key: "l0", Error: "timeout"})
			ready[slot] = at + 20*ms + rng.Int64N(60*ms)
			continue
		}
		token++
		add(histories.Op{Type: histories.OK, F: histories.FAcquire, Process: p, Time: grant, Key: "l0", Value: raw(map[string]int64{"token": token})})
		rel := grant + 60*ms + rng.Int64N(140*ms)
		add(histories.Op{Type: histories.Invoke, F: histories.FRelease, Process: p, Time: rel, Key: "l0"})
		if !crashed && inPartition(rel) {
			crashed = true
			at := rel + 1000*ms
			add(histories.Op{Type: histories.Info, F: histories.FRelease, Process: p, Time: at, Key: "l0", Error: "connection loss"})
			lockFree = max(lockFree, at)
			ids[slot] = nextID
			nextID++
			ready[slot] = at + 50*ms
			continue
		}
		done := rel + 2*ms + rng.Int64N(5*ms)
		add(histories.Op{Type: histories.OK, F: histories.FRelease, Process: p, Time: done, Key: "l0"})
		lockFree = max(lockFree, done)
		ready[slot] = done + 20*ms + rng.Int64N(80*ms)
	}
	nem := func(f histories.F, t int64, v any) {
		add(histories.Op{Type: histories.Info, F: f, Process: histories.NemesisProcess, Time: t, Value: raw(v)})
	}
	grudge := map[string][]string{"s1": {"s3"}, "s2": {"s3"}, "s3": {"s1", "s2"}}
	nem(histories.FStart, partStart, map[string]any{"fault": "partition", "shape": "isolate-leader", "leader": "s3", "grudge": grudge})
	nem(histories.FStop, partStop, map[string]any{"fault": "partition", "shape": "isolate-leader", "leader": "s3", "grudge": grudge})
	nem(histories.FStart, 13000*ms, map[string]any{"fault": "pause", "target": "one", "servers": []string{"s1"}})
	sort.SliceStable(h, func(i, j int) bool { return h[i].Time < h[j].Time })
	last := h[len(h)-1].Time
	nem(histories.FLiveness, last+100*ms, map[string]any{"ok": true, "bound_ns": 5000 * ms, "finals": []map[string]any{{"slot": 1, "process": 0, "reply": "ok", "waited_ms": 12}}})
	for i := range h {
		h[i].Index = int64(i)
	}
	if err := histories.Validate(h); err != nil {
		panic(err)
	}
	return h
}

func write(path string, h histories.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := histories.WriteJSONL(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
