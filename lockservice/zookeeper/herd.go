package zookeeper

import (
	"context"
	"sync"

	"github.com/zlockcheck/zlockcheck/models/herd"
)

// HerdSample asks every server, in parallel, for its watches (wchc) and request
// counters (mntr), for the herd verdict on lockPath (package herd); at is the
// sample's time in the history. A server that does not answer is counted; logf
// hears of an answer that cannot be read.
func (e *Ensemble) HerdSample(ctx context.Context, at int64, lockPath string, logf func(string, ...any)) herd.Sample {
	type answer struct {
		watches []herd.Watch
		server  *herd.Server
	}
	answers := make([]answer, len(e.Servers))
	var wg sync.WaitGroup
	for i, s := range e.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].watches, answers[i].server = e.herdServer(ctx, s, logf)
		}()
	}
	wg.Wait()
	var watches []herd.Watch
	var servers []herd.Server
	unanswered := 0
	for _, a := range answers {
		if a.server == nil {
			unanswered++
			continue
		}
		watches = append(watches, a.watches...)
		servers = append(servers, *a.server)
	}
	return herd.NewSample(at, lockPath, watches, servers, unanswered)
}

// herdServer asks server s for mntr, wchc and mntr again, up to three times until
// its watch count stood still enough in between (herd.NewServer); a try's closing
// mntr opens the next try, which asks for wchc right after it. nil when s did not
// answer, or answered without counters (paused: an empty answer at the deadline; not
// serving: a sentence).
func (e *Ensemble) herdServer(ctx context.Context, s *Server, logf func(string, ...any)) ([]herd.Watch, *herd.Server) {
	var srv herd.Server
	var watches []herd.Watch
	before, ok := e.herdCounters(ctx, s)
	if !ok {
		return nil, nil
	}
	for range 3 {
		text, err := e.fourLetter(ctx, s, "wchc")
		if err != nil {
			return nil, nil
		}
		if watches, err = herd.ParseWchc(text); err != nil {
			logf("herd: server %d: %v", s.ID, err)
			return nil, nil
		}
		after, ok := e.herdCounters(ctx, s)
		if !ok {
			return nil, nil
		}
		srv = herd.NewServer(s.ID, watches, before, after)
		if srv.ChildWatches >= 0 {
			break
		}
		before = after
	}
	return watches, &srv
}

// herdCounters asks server s for mntr; false when it did not answer with its
// counters.
func (e *Ensemble) herdCounters(ctx context.Context, s *Server) (map[string]int64, bool) {
	text, err := e.fourLetter(ctx, s, "mntr")
	if err != nil {
		return nil, false
	}
	m := herd.ParseMntr(text)
	_, ok := m[herd.WatchCount]
	return m, ok
}
