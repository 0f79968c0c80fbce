package recipes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// maxRequestLine bounds one request line; real requests are a few hundred bytes.
const maxRequestLine = 1 << 20

// ServeConfig says which recipe a worker runs and where it talks.
type ServeConfig struct {
	// Recipe names a built-in recipe (see Names).
	Recipe string
	// New, when set, builds the recipe instead of the built-in named by Recipe.
	New Constructor
	// In carries the harness's requests, one JSON object per line.
	In io.Reader
	// Out receives replies and events, one JSON object per line, nothing else. Each
	// line is one Write; if Out has a Flush() error method it is called after each.
	Out io.Writer
	// Log receives diagnostics (the worker's stderr); nil discards them.
	Log io.Writer
	// MaxProtocol is the newest worker protocol version to accept when the harness
	// offers it (0: workloads.ProtocolVersion; 1 makes a v1 worker).
	MaxProtocol int
}

// Serve runs one worker: it reads requests from cfg.In until a close request, EOF or
// the end of ctx, answers each with exactly one reply of the same id on cfg.Out, and
// writes the recipe's events there as they happen. The first request must be init
// (or close); a failed init may be retried. Read and write requests go to the
// recipe's Counter methods, and fail for a recipe that has none; an init that asks
// for fencing fails for such a recipe.
//
// Serve returns nil after a close request or EOF on cfg.In, and an error for a
// malformed or out-of-protocol request line, a read or write error, or the end of
// ctx. It closes the recipe on every exit path. When cfg.In reaches EOF while a
// request runs, that request's context is cancelled.
func Serve(ctx context.Context, cfg ServeConfig) error {
	if cfg.In == nil || cfg.Out == nil {
		return errors.New("recipes: ServeConfig needs In and Out")
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	logger := log.New(logw, "worker: ", log.LstdFlags|log.Lmicroseconds)
	newRecipe := cfg.New
	if newRecipe == nil {
		c, err := Lookup(cfg.Recipe)
		if err != nil {
			logger.Print(err)
			return err
		}
		newRecipe = c
	}

	name := cfg.Recipe
	if name == "" {
		name = "recipe"
	}
	out := newOutbox(cfg.Out)
	go out.run()
	s := &server{log: logger, logw: logw, out: out, newRecipe: newRecipe, name: name,
		maxProtocol: cfg.MaxProtocol, start: time.Now()}
	if s.maxProtocol <= 0 {
		s.maxProtocol = workloads.ProtocolVersion
	}
	quit := make(chan struct{})
	lines, inputDone := readLines(cfg.In, quit)

	err := s.loop(ctx, lines, inputDone)
	close(quit)
	if s.recipe != nil {
		if cerr := s.recipe.Close(); cerr != nil {
			logger.Printf("closing recipe: %v", cerr)
		}
		s.recipe = nil
	}
	if werr := out.close(); werr != nil && err == nil {
		err = werr
	}
	return err
}

// server is the state of one Serve call.
type server struct {
	log       *log.Logger
	logw      io.Writer
	out       *outbox
	newRecipe Constructor
	// name is the recipe's name, for messages.
	name   string
	recipe Recipe
	// writeRetry is how long a counter write with an unknown outcome is retried.
	writeRetry time.Duration
	// maxProtocol is the newest version accepted; protocol the one init agreed.
	maxProtocol, protocol int
	// start is the origin of the worker's monotonic clock (v2 times).
	start time.Time
	// hold is shared with the recipe's events while a v2 cycle runs.
	hold holdWatch
}

// input is one line read from the harness, or the read error that ended input.
type input struct {
	line []byte
	err  error
}

// readLines reads cfg.In in its own goroutine so that EOF can cancel a running
// request. inputDone is closed when reading stopped; lines is then closed after any
// error was delivered.
func readLines(r io.Reader, quit <-chan struct{}) (lines <-chan input, inputDone <-chan struct{}) {
	ch := make(chan input)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), maxRequestLine)
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			select {
			case ch <- input{line: line}:
			case <-quit:
				close(done)
				return
			}
		}
		close(done)
		if err := sc.Err(); err != nil {
			select {
			case ch <- input{err: err}:
			case <-quit:
			}
		}
	}()
	return ch, done
}

func (s *server) loop(ctx context.Context, lines <-chan input, inputDone <-chan struct{}) error {
	for {
		var in input
		var ok bool
		select {
		case <-ctx.Done():
			s.log.Printf("stopping: %v", ctx.Err())
			return ctx.Err()
		case in, ok = <-lines:
		}
		switch {
		case !ok:
			s.log.Printf("stdin closed; closing")
			return nil
		case in.err != nil:
			s.log.Printf("reading requests: %v", in.err)
			return fmt.Errorf("reading requests: %w", in.err)
		case len(bytes.TrimSpace(in.line)) == 0:
			continue
		}
		req, err := workloads.ParseRequest(in.line)
		if err != nil {
			s.log.Printf("malformed request line %q: %v", in.line, err)
			return fmt.Errorf("malformed request line: %w", err)
		}
		done, err := s.handle(ctx, req, inputDone)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// handle answers one request. done reports a close; err a protocol violation or a
// failure to write the reply.
func (s *server) handle(ctx context.Context, req workloads.Request, inputDone <-chan struct{}) (done bool, err error) {
	if s.recipe == nil && req.Op != workloads.OpInit && req.Op != workloads.OpClose {
		s.log.Printf("request %d: %s before a successful init", req.ID, req.Op)
		return false, fmt.Errorf("request %d: %s before a successful init", req.ID, req.Op)
	}
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-inputDone:
			cancel()
		case <-opCtx.Done():
		}
	}()

	switch req.Op {
	case workloads.OpInit:
		if s.recipe != nil {
			s.log.Printf("request %d: init twice", req.ID)
			return false, fmt.Errorf("request %d: init twice", req.ID)
		}
		r, err := s.init(opCtx, req)
		var res result
		if err == nil {
			s.recipe = r
			s.protocol = min(max(req.Protocol, 1), s.maxProtocol)
			s.log.Printf("init: protocol v%d", s.protocol)
			if s.protocol >= 2 {
				res.protocol = s.protocol
			}
		} else {
			s.log.Printf("init: %v", err)
		}
		return false, s.reply(req.ID, res, err)
	case workloads.OpClock, workloads.OpCycle:
		if s.protocol < 2 {
			s.log.Printf("request %d: %s in protocol v1", req.ID, req.Op)
			return false, fmt.Errorf("request %d: %s is protocol v2, and init agreed v1", req.ID, req.Op)
		}
		if req.Op == workloads.OpClock {
			now := s.mono()
			return false, s.reply(req.ID, result{mono: &now}, nil)
		}
		return false, s.cycle(opCtx, req)
	case workloads.OpAcquire:
		if req.TimeoutMS < 0 {
			return false, s.reply(req.ID, result{}, Fail(fmt.Errorf("negative timeout_ms %d", req.TimeoutMS)))
		}
		g, err := s.recipe.Acquire(opCtx, AcquireRequest{
			Timeout: time.Duration(req.TimeoutMS) * time.Millisecond,
			Mode:    req.Mode,
		})
		return false, s.reply(req.ID, result{token: g.Token, lock: g.Lock}, err)
	case workloads.OpRelease:
		return false, s.reply(req.ID, result{}, s.recipe.Release(opCtx))
	case workloads.OpRead:
		c, ok := s.recipe.(Counter)
		if !ok {
			return false, s.reply(req.ID, result{}, Fail(ErrNoCounter))
		}
		v, err := c.Read(opCtx)
		return false, s.reply(req.ID, result{value: &v}, err)
	case workloads.OpWrite:
		c, ok := s.recipe.(Counter)
		if !ok {
			return false, s.reply(req.ID, result{}, Fail(ErrNoCounter))
		}
		return false, s.reply(req.ID, result{}, s.writeRetrying(opCtx, c, *req.Value))
	case workloads.OpClose:
		var err error
		if s.recipe != nil {
			err = s.recipe.Close()
			s.recipe = nil
		}
		return true, s.reply(req.ID, result{}, err)
	}
	// ParseRequest admits only the ops above.
	return false, fmt.Errorf("request %d: unknown op %q", req.ID, req.Op)
}

// followsSentinels reports whether the catalogue's recipe name finds its primary
// through Redis Sentinels (Entry.Sentinel).
func followsSentinels(name string) bool {
	e, err := Find(name)
	return err == nil && e.Sentinel
}

// followsCluster reports whether the catalogue's recipe name follows a Redis
// Cluster's slots (Entry.Cluster).
func followsCluster(name string) bool {
	e, err := Find(name)
	return err == nil && e.Cluster
}

// init decodes an init request into a Config and builds the recipe.
func (s *server) init(ctx context.Context, req workloads.Request) (Recipe, error) {
	var servers []string
	for _, h := range strings.Split(req.Connect, ",") {
		if h = strings.TrimSpace(h); h != "" {
			servers = append(servers, h)
		}
	}
	switch {
	case len(servers) == 0:
		return nil, Fail(errors.New("init: connect is empty"))
	case req.SessionTimeoutMS <= 0:
		return nil, Fail(fmt.Errorf("init: session_timeout_ms must be positive, got %d", req.SessionTimeoutMS))
	case !validZnodePath(req.Path):
		return nil, Fail(fmt.Errorf("init: path must be an absolute znode path, got %q", req.Path))
	case req.Kind == "":
		return nil, Fail(errors.New("init: kind is empty"))
	case req.CounterPath != "" && !validZnodePath(req.CounterPath):
		return nil, Fail(fmt.Errorf("init: counter_path must be an absolute znode path, got %q", req.CounterPath))
	case req.SentinelMaster != "" && !followsSentinels(s.name):
		return nil, Fail(fmt.Errorf("init: sentinel_master %q: recipe %s has no Sentinel mode here (connect would name sentinels, not Redis instances)", req.SentinelMaster, s.name))
	case req.RedisCluster && req.SentinelMaster != "":
		return nil, Fail(errors.New("init: redis_cluster and sentinel_master: a Redis Cluster has no sentinels"))
	case req.RedisCluster && !followsCluster(s.name):
		return nil, Fail(fmt.Errorf("init: redis_cluster: recipe %s has no Redis Cluster mode here (connect names a cluster's instances, each serving some slots)", s.name))
	}
	r, err := s.newRecipe(ctx, Config{
		Servers:        servers,
		SentinelMaster: req.SentinelMaster,
		RedisCluster:   req.RedisCluster,
		SessionTimeout: time.Duration(req.SessionTimeoutMS) * time.Millisecond,
		Path:           req.Path,
		Kind:           workloads.Kind(req.Kind),
		Permits:        req.Permits,
		Worker:         req.Worker,
		CounterPath:    req.CounterPath,
		Fenced:         req.Fenced,
		Log:            s.logw,
		Events:         serveEvents{log: s.log, out: s.out, hold: &s.hold},
	})
	if err != nil {
		return nil, err
	}
	s.writeRetry = time.Duration(max(req.WriteRetryMS, 0)) * time.Millisecond
	if _, ok := r.(Counter); req.Fenced && !ok {
		// Fencing is about counter writes; a recipe without them cannot fence.
		if cerr := r.Close(); cerr != nil {
			s.log.Printf("closing recipe: %v", cerr)
		}
		return nil, Fail(fmt.Errorf("%s cannot fence: %w", s.name, ErrNoCounter))
	}
	return r, nil
}

// writeRetryPause is the pause between two attempts of a counter write.
const writeRetryPause = 100 * time.Millisecond

// writeRetrying performs a counter write and, while its outcome is unknown, tries
// again for up to the init's write_retry_ms, as an application using Curator's or
// Kazoo's retrying operations would. A retried unfenced write may land after the lock
// passed to another worker (a lost update); a fenced one fails once the node is gone,
// and is then still info: an earlier attempt may have been applied.
func (s *server) writeRetrying(ctx context.Context, c Counter, v int64) error {
	deadline := time.Now().Add(s.writeRetry)
	for attempt := 0; ; attempt++ {
		err := c.Write(ctx, v)
		reply, _ := Classify(err)
		if reply == workloads.ReplyFail && attempt > 0 {
			// An earlier attempt may have been applied: the write's outcome is unknown,
			// whatever this attempt says.
			return Info(fmt.Errorf("%w (after %d attempts whose outcome is unknown)", err, attempt))
		}
		if reply != workloads.ReplyInfo || !time.Now().Add(writeRetryPause).Before(deadline) {
			return err
		}
		s.log.Printf("write %d: %v: retrying", v, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(writeRetryPause):
		}
	}
}

// validZnodePath reports whether p is an absolute znode path other than the root.
func validZnodePath(p string) bool {
	return strings.HasPrefix(p, "/") && len(p) >= 2 && !strings.HasSuffix(p, "/")
}

// result is what an ok reply carries besides its id.
type result struct {
	token    json.RawMessage
	lock     *workloads.LockPlace
	value    *int64
	protocol int
	mono     *int64
}

// reply writes the one reply to request id and waits until it is written; res is
// sent only with an ok reply.
func (s *server) reply(id int64, res result, err error) error {
	typ, msg := Classify(err)
	m := workloads.Message{ID: &id, Type: typ, Error: msg}
	if typ == workloads.ReplyOK {
		m.Token, m.Lock, m.Value, m.Protocol, m.MonoNS = res.token, res.lock, res.value, res.protocol, res.mono
	}
	if err := s.out.post(m); err != nil {
		s.log.Printf("reply %d: %v", id, err)
		return err
	}
	if err := s.out.flush(); err != nil {
		s.log.Printf("writing reply %d: %v", id, err)
		return fmt.Errorf("writing reply %d: %w", id, err)
	}
	return nil
}

// serveEvents turns a recipe's events into event lines; it never blocks for long.
type serveEvents struct {
	log  *log.Logger
	out  *outbox
	hold *holdWatch
}

// Lost queues a lost event; during a v2 cycle's hold it also ends the cycle.
func (e serveEvents) Lost(reason string) {
	e.log.Printf("event lost: %s", reason)
	e.hold.lose(func() {
		if err := e.out.post(workloads.Message{Event: workloads.EventLost, Error: reason}); err != nil {
			e.log.Printf("event lost: %v", err)
		}
	})
}

// Session queues a session event.
func (e serveEvents) Session(id int64, passwd []byte) {
	m := workloads.Message{Event: workloads.EventSession, SessionID: FormatSessionID(id)}
	if len(passwd) > 0 {
		m.Passwd = base64.StdEncoding.EncodeToString(passwd)
	}
	e.log.Printf("event session: %s", m.SessionID)
	if err := e.out.post(m); err != nil {
		e.log.Printf("event session: %v", err)
	}
}

// Renewed queues a renewed event.
func (e serveEvents) Renewed() {
	if err := e.out.post(workloads.Message{Event: workloads.EventRenewed}); err != nil {
		e.log.Printf("event renewed: %v", err)
	}
}

// FormatSessionID renders a ZooKeeper session id as in the session event, "0x" and
// lower-case hex of its 64 bits.
func FormatSessionID(id int64) string {
	return fmt.Sprintf("0x%x", uint64(id))
}

// outbox serializes everything written to Out: lines are queued without blocking
// and written in queue order by one goroutine, each with a single Write.
type outbox struct {
	w      io.Writer
	mu     sync.Mutex
	cond   *sync.Cond
	queue  [][]byte
	busy   bool
	closed bool
	err    error
	done   chan struct{}
}

func newOutbox(w io.Writer) *outbox {
	o := &outbox{w: w, done: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// post queues one message. After a write error or close it drops the message and
// returns why.
func (o *outbox) post(m workloads.Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	b = append(b, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.err != nil:
		return o.err
	case o.closed:
		return errors.New("output closed")
	}
	o.queue = append(o.queue, b)
	o.cond.Broadcast()
	return nil
}

// send writes one message now, in this goroutine, after what is queued, and returns
// once it is written: no hand-over to the writer goroutine on a cycle's critical path
// (a v2 invoke report goes out right before its request).
func (o *outbox) send(m workloads.Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	b = append(b, '\n')
	o.mu.Lock()
	for (len(o.queue) > 0 || o.busy) && o.err == nil && !o.closed {
		o.cond.Wait()
	}
	switch {
	case o.err != nil:
		o.mu.Unlock()
		return o.err
	case o.closed:
		o.mu.Unlock()
		return errors.New("output closed")
	}
	o.busy = true
	o.mu.Unlock()

	_, werr := o.w.Write(b)
	if flusher, ok := o.w.(interface{ Flush() error }); ok && werr == nil {
		werr = flusher.Flush()
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	o.busy = false
	if werr != nil && o.err == nil {
		o.err = werr
	}
	o.cond.Broadcast()
	return o.err
}

// run writes queued lines until close.
func (o *outbox) run() {
	defer close(o.done)
	flusher, _ := o.w.(interface{ Flush() error })
	o.mu.Lock()
	for {
		for (len(o.queue) == 0 && !o.closed) || o.busy {
			o.cond.Wait() // busy: send is writing
		}
		if len(o.queue) == 0 {
			o.mu.Unlock()
			return
		}
		batch := o.queue
		o.queue = nil
		o.busy = true
		o.mu.Unlock()

		var werr error
		for _, line := range batch {
			if _, werr = o.w.Write(line); werr != nil {
				break
			}
			if flusher != nil {
				if werr = flusher.Flush(); werr != nil {
					break
				}
			}
		}

		o.mu.Lock()
		o.busy = false
		if werr != nil && o.err == nil {
			o.err = werr
		}
		if o.err != nil {
			o.queue = nil
		}
		o.cond.Broadcast()
	}
}

// flush waits until every queued line is written and returns the first write error.
func (o *outbox) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for (len(o.queue) > 0 || o.busy) && o.err == nil {
		o.cond.Wait()
	}
	return o.err
}

// close writes what is queued, stops the writer and returns the first write error.
func (o *outbox) close() error {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
