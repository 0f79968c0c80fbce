package lockservice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// ServingPoll is one look at the servers for waitServing: whether they all serve,
// which one will not serve however long it waits ("server 2 exited"; "" when none),
// and the servers that do not serve.
type ServingPoll struct {
	OK     bool
	Exited string
	Down   []DownServer
}

// DownServer is a server that does not serve, as a not-serving error names it.
type DownServer struct {
	// what names it: "server 2 (10.77.1.2:2181, zlc...s2)".
	What string
	Why  string
	Host nemesis.ServerHost
	Log  string
}

// WaitServing looks at the servers every pace until they all serve, one exited, the
// timeout passes (the error says notWithin, e.g. "no quorum") or ctx ends. The error
// begins with title and names each server down, why, and the tail of its log.
func WaitServing(ctx context.Context, timeout, pace time.Duration, title, notWithin string, look func() ServingPoll) error {
	deadline := time.Now().Add(timeout)
	for {
		p := look()
		switch {
		case p.OK:
			return nil
		case p.Exited != "":
			return notServing(ctx, title, p.Exited, p.Down)
		case time.Now().After(deadline):
			return notServing(ctx, title, fmt.Sprintf("%s within %s", notWithin, timeout), p.Down)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pace):
		}
	}
}

// notServing is waitServing's error.
func notServing(ctx context.Context, title, why string, down []DownServer) error {
	var b strings.Builder
	b.WriteString(title + ": " + why)
	for _, d := range down {
		fmt.Fprintf(&b, "\n  %s: %s; last lines of %s:\n", d.What, d.Why, d.Log)
		lines, err := d.Host.LogTail(ctx, 8)
		if err != nil {
			lines = []string{"(" + err.Error() + ")"}
		}
		for _, l := range lines {
			b.WriteString("    " + l + "\n")
		}
	}
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

// ServerCheck is one server as a look of WaitServing sees it.
type ServerCheck struct {
	// Name is how an error says it exited ("server 2"); What names it in full
	// ("server 2 (10.77.1.2:5432, zlc...s2)").
	Name, What string
	Host       nemesis.ServerHost
	Log        string
	// Serving is nil when the server serves, else why it does not.
	Serving func(ctx context.Context) error
}

// Poll looks at every server at once: the look WaitServing wants of servers that
// serve each on its own (no quorum to wait for). A server of an existing deployment
// that does not serve is not waited for: the tool cannot start it, and what keeps it
// from serving (a wrong password, a replica not linked) is for its owner to mend.
func Poll(ctx context.Context, servers []ServerCheck) ServingPoll {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Serving(ctx) }()
	}
	wg.Wait()
	p := ServingPoll{OK: true}
	for i, s := range servers {
		if errs[i] == nil {
			continue
		}
		p.OK = false
		p.Down = append(p.Down, DownServer{What: s.What, Why: errs[i].Error(), Host: s.Host, Log: s.Log})
		if _, existing := s.Host.(ExistingHost); p.Exited == "" && existing {
			p.Exited = s.Name + " of the existing deployment does not serve"
		} else if p.Exited == "" && s.Host.Pid() == 0 {
			p.Exited = s.Name + " exited"
		}
	}
	return p
}
