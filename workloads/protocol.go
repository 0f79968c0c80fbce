package workloads

import (
	"encoding/json"
	"fmt"
)

// ProtocolVersion is the newest worker protocol version this harness speaks. It
// offers it in init (Request.Protocol); a worker answers with the newest version it
// speaks up to that (Message.Protocol; absent means v1), and is spoken to in it.
const ProtocolVersion = 3

// Protocol versions: v1 steps every op through the harness; v2 hands the worker a
// whole cycle (OpCycle) that it reports step by step, invokes and completions; v3
// runs the same cycle with one report per op, its completion carrying its invoke's
// time, and no reply when the cycle's last report ends it.
const (
	ProtocolV1 = 1
	ProtocolV2 = 2
	ProtocolV3 = 3
)

// Request operations, harness to worker.
const (
	OpInit    = "init"
	OpAcquire = "acquire"
	OpRelease = "release"
	OpClose   = "close"
	// OpRead and OpWrite are the counter workload's critical section: read the
	// counter znode, write it back plus one.
	OpRead  = "read"
	OpWrite = "write"
	// OpClock (v2) asks for the worker's monotonic clock (Message.MonoNS).
	OpClock = "clock"
	// OpCycle (v2) hands the worker a whole lock cycle to run on its own: acquire
	// (Depth times), hold HoldUS, release as often as acquired; it reports each step
	// as it happens (Message.Step) and replies once the cycle is over.
	OpCycle = "cycle"
)

// Step reports (v2, v3): what happened to one op of a cycle, with Message.F. v3
// sends no StepInvoke: its completion carries the invoke's time (Message.InvokeNS).
const (
	StepInvoke = "invoke"
	StepOK     = ReplyOK
	StepFail   = ReplyFail
	StepInfo   = ReplyInfo
)

// Reply types, worker to harness. They match the history's completion types.
const (
	ReplyOK   = "ok"
	ReplyFail = "fail"
	ReplyInfo = "info"
)

// Events a worker may send at any time.
const (
	// EventLost: the worker learned it no longer holds what it acquired.
	EventLost = "lost"
	// EventSession: the worker has a new ZooKeeper session.
	EventSession = "session"
	// EventRenewed: the server renewed the worker's lease on what it holds, having
	// checked it was still the worker's (optional: a lease recipe that says so lets
	// the checker see a holder renew a lease after another was granted the lock).
	EventRenewed = "renewed"
)

// Request is one line the harness writes to a worker's stdin. Only the fields of its
// Op are set; the worker answers every request with exactly one Reply of the same ID.
type Request struct {
	ID int64  `json:"id"`
	Op string `json:"op"`

	// init
	Connect          string `json:"connect,omitempty"`
	SessionTimeoutMS int64  `json:"session_timeout_ms,omitempty"`
	Path             string `json:"path,omitempty"`
	Kind             string `json:"kind,omitempty"`
	Permits          int    `json:"permits,omitempty"`
	Worker           int    `json:"worker,omitempty"`
	// CounterPath is the counter znode of the counter workload (init).
	CounterPath string `json:"counter_path,omitempty"`
	// Fenced asks the worker to make counter writes conditional on its lock node
	// still existing (a multi of check + setData); a worker that cannot must fail init.
	Fenced bool `json:"fenced,omitempty"`
	// WriteRetryMS: retry a counter write whose outcome is unknown (connection loss)
	// for this long before answering info; 0 or absent: never retry (init).
	WriteRetryMS int64 `json:"write_retry_ms,omitempty"`
	// SentinelMaster (init), when set, says Connect names Redis Sentinels, not Redis
	// instances, and that they know the primary by this name: the worker finds the
	// primary through them and follows a promotion (a worker that cannot must fail
	// init).
	SentinelMaster string `json:"sentinel_master,omitempty"`
	// RedisCluster (init), when true, says Connect names the instances of a Redis
	// Cluster: the worker sends each key to the primary that serves its slot (a
	// cluster client) and follows the cluster's failovers (a worker that cannot
	// must fail init).
	RedisCluster bool `json:"redis_cluster,omitempty"`

	// acquire
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
	Mode      string `json:"mode,omitempty"`

	// write: the value to store.
	Value *int64 `json:"value,omitempty"`

	// Protocol (init) is the newest protocol version the harness speaks.
	Protocol int `json:"protocol,omitempty"`
	// Depth (cycle) is how often to acquire (nested, reentrant workload); 0 means 1.
	Depth int `json:"depth,omitempty"`
	// HoldUS (cycle) is how long to hold, in microseconds, once every level is held.
	HoldUS int64 `json:"hold_us,omitempty"`
}

// Message is one line a worker writes to stdout: a reply (ID and Type set) or an
// event (Event set).
type Message struct {
	ID    *int64 `json:"id,omitempty"`
	Type  string `json:"type,omitempty"`
	Error string `json:"error,omitempty"`
	// Token is an optional fencing token on an acquire reply.
	Token json.RawMessage `json:"token,omitempty"`
	// Lock optionally says where the lock an acquire's ok took lives (LockPlace).
	Lock *LockPlace `json:"lock,omitempty"`
	// Value is the counter a read returned.
	Value *int64 `json:"value,omitempty"`

	Event     string `json:"event,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Passwd    string `json:"passwd,omitempty"`

	// Protocol (init's ok reply) is the version the worker speaks; absent means 1.
	Protocol int `json:"protocol,omitempty"`
	// Step and F make a line a step report of the cycle request ID (v2): op F
	// (acquire or release) was invoked, or completed with Step ok, fail or info.
	Step string `json:"step,omitempty"`
	F    string `json:"f,omitempty"`
	// MonoNS is the worker's monotonic clock, in nanoseconds from an origin of its
	// own: when a step happened, or (clock reply) now.
	MonoNS *int64 `json:"mono_ns,omitempty"`
	// InvokeNS (v3 step reports) is when the completed op was invoked, on the same
	// clock as MonoNS: stamped before its request went out to ZooKeeper.
	InvokeNS *int64 `json:"invoke_ns,omitempty"`
}

// IsReport says whether m is a step report (v2, v3) rather than a reply or an event.
func (m Message) IsReport() bool { return m.Step != "" }

// ParseMessage decodes and validates one worker output line.
func ParseMessage(line []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, fmt.Errorf("not a JSON object: %w", err)
	}
	switch {
	case m.Event != "" && m.ID != nil:
		return Message{}, fmt.Errorf("field event: a line is either a reply (id) or an event, not both")
	case m.Event != "":
		if m.Event != EventLost && m.Event != EventSession && m.Event != EventRenewed {
			return Message{}, fmt.Errorf("field event: unknown event %q", m.Event)
		}
	case m.ID != nil && m.Step != "":
		if err := checkReport(m); err != nil {
			return Message{}, err
		}
	case m.ID != nil:
		if m.Type != ReplyOK && m.Type != ReplyFail && m.Type != ReplyInfo {
			return Message{}, fmt.Errorf("field type: want ok, fail or info, got %q", m.Type)
		}
	default:
		return Message{}, fmt.Errorf("field id: missing (a line needs id or event)")
	}
	if m.Lock != nil {
		if m.Type != ReplyOK && !(m.Step == StepOK && m.F == OpAcquire) {
			return Message{}, fmt.Errorf("field lock: only on an acquire's ok")
		}
		if err := m.Lock.Validate(); err != nil {
			return Message{}, err
		}
	}
	return m, nil
}

// ParseRequest decodes and validates one harness request line (used by workers).
func ParseRequest(line []byte) (Request, error) {
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return Request{}, fmt.Errorf("not a JSON object: %w", err)
	}
	switch r.Op {
	case OpInit, OpAcquire, OpRelease, OpClose, OpRead, OpClock:
	case OpCycle:
		if r.Depth < 0 || r.HoldUS < 0 || r.TimeoutMS < 0 {
			return Request{}, fmt.Errorf("field depth, hold_us or timeout_ms: negative in a cycle request")
		}
	case OpWrite:
		if r.Value == nil {
			return Request{}, fmt.Errorf("field value: write needs a value")
		}
	default:
		return Request{}, fmt.Errorf("field op: unknown op %q", r.Op)
	}
	return r, nil
}

// checkReport validates a step report: a known step, an op of a cycle, a time.
func checkReport(m Message) error {
	switch {
	case m.Step != StepInvoke && m.Step != StepOK && m.Step != StepFail && m.Step != StepInfo:
		return fmt.Errorf("field step: want invoke, ok, fail or info, got %q", m.Step)
	case m.F != OpAcquire && m.F != OpRelease:
		return fmt.Errorf("field f: want acquire or release, got %q", m.F)
	case m.Type != "":
		return fmt.Errorf("field type: a step report has step, not type")
	case m.MonoNS == nil:
		return fmt.Errorf("field mono_ns: missing (a step report needs the time it happened)")
	case m.InvokeNS != nil && m.Step == StepInvoke:
		return fmt.Errorf("field invoke_ns: only on a completion (v3), not on an invoke report")
	case m.InvokeNS != nil && *m.InvokeNS > *m.MonoNS:
		return fmt.Errorf("field invoke_ns: %d is after the completion's mono_ns %d", *m.InvokeNS, *m.MonoNS)
	}
	return nil
}
