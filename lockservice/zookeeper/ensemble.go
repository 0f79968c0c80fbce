package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/fourletter"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// ZooKeeper defaults. The tick is small so sessions expire in seconds; syncLimit keeps
// production's ratio (Debian's sample: 2000 ms × 5 = 10 s, longer than a 4 s session):
// a follower cut off from its leader keeps answering its clients for longer than a
// session lives, which is the gap isolate-follower-quorum needs. 200 ms × 30 = 6 s > 4 s.
const (
	DefaultTick      = 200 * time.Millisecond
	DefaultInitLimit = 50
	DefaultSyncLimit = 30
	clientPort       = 2181
	quorumPort       = 2888
	electionPort     = 3888
)

// EnsembleConfig says how to run the ZooKeeper servers.
type EnsembleConfig struct {
	// Nodes is the number of voting servers (3 or 5 are usual; 1 runs
	// standalone-in-quorum-mode).
	Nodes int
	// Observers is the number of observers beside them: servers Nodes+1 to
	// Nodes+Observers, which serve clients and follow the leader's state but do not
	// vote (peerType=observer). Members says each server's role.
	Observers int
	// ZKHome is a ZooKeeper install (a release tarball's directory); empty means
	// Debian's zookeeper package.
	ZKHome string
	// Release is a ZooKeeper release from Maven Central (one of Releases), fetched
	// into CacheDir (maven.CacheDir's override) on first use; empty means ZKHome or
	// Debian's package.
	Release  string
	CacheDir string
	// Java is the java binary; empty means "java".
	Java string
	// Dir is where each server's config, data and log go (Dir/s1, Dir/s2, ...).
	Dir string
	// Tick, InitLimit, SyncLimit are zoo.cfg's tickTime, initLimit and syncLimit.
	Tick      time.Duration
	InitLimit int
	SyncLimit int
	// MaxSessionTimeout is the largest session timeout the servers grant.
	MaxSessionTimeout time.Duration
	// Heap is the JVM heap of each server, e.g. "256m".
	Heap string
	// FullJIT lets the servers' JVMs compile with C2 too; by default they stop at C1
	// (-XX:TieredStopAtLevel=1), which starts faster (BENCHMARKS.md, ensemble tuning).
	FullJIT bool
	// StartTimeout bounds the wait for a quorum.
	StartTimeout time.Duration
	// NoForceSync writes forceSync=no: the servers acknowledge a write before it is
	// fsynced to their transaction log. Faster, but a different durability model
	// (a write acknowledged by a quorum can be lost if those servers all crash), so
	// only ever an explicit choice, recorded in config.json.
	NoForceSync bool
}

// Role is a ZooKeeper server's part in its ensemble.
type Role string

// The roles of a server.
const (
	// Participant is a voting server: the leader or a follower.
	Participant Role = "participant"
	// Observer serves clients and applies the leader's commits but does not vote:
	// writes (a lock node's create and delete) still go through the leader.
	Observer Role = "observer"
)

// Member is one server of the ensemble as its configuration names it.
type Member struct {
	ID   int
	Role Role
}

// Members lists the ensemble's servers, by id: 1 to Nodes vote, the Observers after
// them observe. It is the one place a server's role is decided.
func (c EnsembleConfig) Members() []Member {
	out := make([]Member, 0, c.Nodes+c.Observers)
	for id := 1; id <= c.Nodes+c.Observers; id++ {
		role := Participant
		if id > c.Nodes {
			role = Observer
		}
		out = append(out, Member{ID: id, Role: role})
	}
	return out
}

// validate reports an ensemble that cannot be configured, naming the flag.
func (c EnsembleConfig) validate() error {
	switch {
	case c.Observers < 0:
		return fmt.Errorf("observers: want 0 or more, got %d", c.Observers)
	case c.Nodes < 1:
		return fmt.Errorf("nodes: want at least 1 voting server, got %d", c.Nodes)
	case c.Nodes+c.Observers > 9:
		return fmt.Errorf("nodes, observers: want 1 to 9 servers in all, got %d voting and %d observers", c.Nodes, c.Observers)
	}
	return nil
}

// Server is one ZooKeeper server of the ensemble: its id (myid), where it runs, its
// client port (2181, or an existing ensemble's, --connect), its directory with
// zoo.cfg (Conf), data and log; and its role.
type Server struct {
	lockservice.Member
	// Role is whether it votes or observes ("" for a server of an existing ensemble:
	// unknown).
	Role Role
}

// Ensemble is a running set of ZooKeeper servers. Everything done to a server goes
// through its Host; the harness reaches the servers' client ports from its own
// namespace on net, or, for servers on real hosts, with dial.
type Ensemble struct {
	net     *netns.Network
	Servers []*Server
	// external is set for an existing ensemble (connect.go): the servers are not
	// the tool's, so it knows no pids, and the leader may be a server not listed.
	external bool
	// dial, when set, replaces net.Dial (servers on real hosts: see remote.go).
	dial func(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error)
	// shutdown, when set, is how Close ends the ensemble (a remote one copies its
	// files back and removes its node directories).
	shutdown func() error
}

// Dial opens a TCP connection from the harness to addr (a server's client port).
func (e *Ensemble) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if e.dial != nil {
		return e.dial(ctx, addr, timeout)
	}
	return e.net.Dial(ctx, addr, timeout)
}

func (c *EnsembleConfig) defaults() {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Java == "" {
		c.Java = "java"
	}
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.InitLimit == 0 {
		c.InitLimit = DefaultInitLimit
	}
	if c.SyncLimit == 0 {
		c.SyncLimit = DefaultSyncLimit
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 60 * time.Second
	}
	if c.Heap == "" {
		c.Heap = "256m"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
}

// installFiles is where a ZooKeeper install is looked up: this machine (localFiles)
// or a node over SSH (lockservice.SSHHost's files).
type installFiles interface {
	// Glob returns the paths matching each pattern (filepath.Match syntax), pattern
	// after pattern: one round trip for all of them.
	Glob(ctx context.Context, patterns ...string) ([]string, error)
	// Where names the machine, for errors ("" for this one).
	Where() string
}

var (
	_ installFiles = localFiles{}
	_ installFiles = (*lockservice.SSHHost)(nil)
)

// localFiles is this machine's file system.
type localFiles struct{}

func (localFiles) Glob(_ context.Context, patterns ...string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}
func (localFiles) Where() string { return "" }

// classpath finds the jars for ZooKeeper and a logging backend in fs.
func (c *EnsembleConfig) classpath(ctx context.Context, fs installFiles) (string, error) {
	on := ""
	if w := fs.Where(); w != "" {
		on = " on " + w
	}
	home, flag := c.ZKHome, "--zk-home"
	if c.Release != "" {
		var err error
		if home, err = fetchRelease(ctx, c.Release, c.CacheDir); err != nil {
			return "", err
		}
		flag = "--zk-version " + c.Release + ": " + home
	}
	if home != "" {
		parts, err := fs.Glob(ctx, filepath.Join(home, "conf"), filepath.Join(home, "*.jar"), filepath.Join(home, "lib/*.jar"))
		if err != nil {
			return "", err
		}
		if len(parts) < 2 {
			return "", fmt.Errorf("%s%s: no ZooKeeper jars found (looked for *.jar and lib/*.jar)", flag, on)
		}
		return strings.Join(parts, ":"), nil
	}
	// Debian's zookeeper.jar names its dependencies in its manifest, but no slf4j
	// backend: without one the servers log nothing.
	jar, slf4j := "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"
	found, err := fs.Glob(ctx, jar, slf4j)
	if err != nil {
		return "", err
	}
	if !slices.Contains(found, jar) {
		return "", fmt.Errorf("%s not found%s: install Debian's zookeeper package (make setup, or --zk-setup apt on SSH nodes) or pass --zk-home", jar, on)
	}
	if slices.Contains(found, slf4j) {
		return jar + ":" + slf4j, nil
	}
	return jar, nil
}

// StartEnsemble creates a namespace per server on net, writes each server's config and
// starts them, then waits for a quorum. On error the servers already started are left
// for the caller's Stop (or the network's Destroy) to remove.
func StartEnsemble(ctx context.Context, net *netns.Network, cfg EnsembleConfig) (*Ensemble, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cp, err := cfg.classpath(ctx, localFiles{})
	if err != nil {
		return nil, err
	}
	e := &Ensemble{net: net}
	members := cfg.Members()
	addrs := make([]netip.Addr, len(members))
	for i, m := range members {
		addrs[i] = lockservice.ServerAddr(m.ID)
	}
	peers := peerLines(members, addrs)
	for _, m := range members {
		s, err := addServer(ctx, net, cfg, cp, m, peers)
		if err != nil {
			return e, err
		}
		e.Servers = append(e.Servers, s)
	}
	for _, s := range e.Servers {
		if err := s.Host.Start(ctx); err != nil {
			return e, err
		}
	}
	if err := e.WaitServing(ctx, cfg.StartTimeout); err != nil {
		return e, err
	}
	return e, nil
}

// addServer makes member m's namespace on net and writes its files.
func addServer(ctx context.Context, net *netns.Network, cfg EnsembleConfig, classpath string, m Member, peers []string) (*Server, error) {
	id := m.ID
	ns, err := net.AddHost(ctx, fmt.Sprintf("s%d", id), lockservice.ServerAddr(id))
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.Dir, ns.Name)
	s := &Server{Member: lockservice.Member{ID: id, Port: clientPort, Dir: dir,
		Conf: filepath.Join(dir, "zoo.cfg"), Log: filepath.Join(dir, "server.log")}, Role: m.Role}
	if err := writeServerFiles(s, cfg, peers); err != nil {
		return nil, err
	}
	s.Host = lockservice.NewNSHost(id, ns, serverCommand(s.Dir, s.Conf, cfg, classpath), s.Log)
	return s, nil
}

// peerLines are zoo.cfg's server.N lines for the members, member i at addrs[i]; an
// observer's line ends in :observer (in every server's zoo.cfg).
func peerLines(members []Member, addrs []netip.Addr) []string {
	peers := make([]string, len(members))
	for i, m := range members {
		peers[i] = fmt.Sprintf("server.%d=%s:%d:%d", m.ID, addrs[i], quorumPort, electionPort)
		if m.Role == Observer {
			peers[i] += ":observer"
		}
	}
	return peers
}

// writeServerFiles writes s's myid and zoo.cfg (s listens on ServerAddr(s.ID)).
func writeServerFiles(s *Server, cfg EnsembleConfig, peers []string) error {
	data := filepath.Join(s.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), myid(s.ID), 0o644); err != nil {
		return err
	}
	return os.WriteFile(s.Conf, zooCfg(cfg, s.Role, lockservice.ServerAddr(s.ID), data, peers), 0o644)
}

// myid is the content of a server's data/myid.
func myid(id int) []byte { return fmt.Appendf(nil, "%d\n", id) }

// zooCfg is the zoo.cfg of a server of role listening for clients on addr, its data
// in dataDir, with the ensemble's peers (peerLines): the one place a server's
// configuration is written, for servers here and on SSH nodes alike.
func zooCfg(cfg EnsembleConfig, role Role, addr netip.Addr, dataDir string, peers []string) []byte {
	tick := cfg.Tick.Milliseconds()
	lines := []string{
		"# written by zlockcheck",
		fmt.Sprintf("tickTime=%d", tick),
		fmt.Sprintf("initLimit=%d", cfg.InitLimit),
		fmt.Sprintf("syncLimit=%d", cfg.SyncLimit),
		"dataDir=" + dataDir,
		fmt.Sprintf("clientPortAddress=%s", addr),
		fmt.Sprintf("clientPort=%d", clientPort),
		fmt.Sprintf("minSessionTimeout=%d", 2*tick),
		fmt.Sprintf("maxSessionTimeout=%d", cfg.MaxSessionTimeout.Milliseconds()),
		"maxClientCnxns=0",
		"4lw.commands.whitelist=*",
		"admin.enableServer=false",
		"standaloneEnabled=false",
		"reconfigEnabled=false",
		"autopurge.purgeInterval=0",
	}
	if cfg.NoForceSync {
		lines = append(lines, "forceSync=no")
	}
	if role == Observer {
		lines = append(lines, "peerType=observer")
	}
	lines = append(lines, peers...)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// serverCommand is the command line that runs a server whose zoo.cfg is cfgFile,
// logging under logDir.
func serverCommand(logDir, cfgFile string, cfg EnsembleConfig, classpath string) []string {
	jit := "-XX:TieredStopAtLevel=1"
	if cfg.FullJIT {
		jit = "-XX:TieredStopAtLevel=4"
	}
	return []string{cfg.Java,
		"-Xms64m", "-Xmx" + cfg.Heap, "-XX:+UseSerialGC", jit,
		"-Dzookeeper.log.dir=" + logDir,
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
		"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgFile}
}

// Status is what a server's srvr four-letter word reported.
type Status struct {
	ID    int
	Mode  string // leader, follower, observer, standalone, or "" when not serving
	Zxid  string
	Error string
}

// Serving reports whether the server answers clients as part of a quorum (an
// observer too: it follows the quorum's leader).
func (st Status) Serving() bool {
	return st.Mode == "leader" || st.Mode == "follower" || st.Mode == "observer" || st.Mode == "standalone"
}

// Statuses asks every server for srvr.
func (e *Ensemble) Statuses(ctx context.Context) []Status {
	out := make([]Status, len(e.Servers))
	var wg sync.WaitGroup
	for i, s := range e.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = e.srvr(ctx, s)
		}()
	}
	wg.Wait()
	return out
}

func (e *Ensemble) srvr(ctx context.Context, s *Server) Status {
	st := Status{ID: s.ID}
	text, err := e.fourLetter(ctx, s, "srvr")
	if err != nil {
		st.Error = err.Error()
		return st
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "Mode: "); ok {
			st.Mode = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Zxid: "); ok {
			st.Zxid = strings.TrimSpace(v)
		}
	}
	if st.Mode == "" {
		st.Error = strings.TrimSpace(text)
	}
	return st
}

// fourLetter sends a four-letter word to a server and returns its answer.
func (e *Ensemble) fourLetter(ctx context.Context, s *Server, word string) (string, error) {
	conn, err := e.Dial(ctx, s.ClientAddr(), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return fourletter.Ask(conn, word)
}

// ServerOf returns the server a client is connected to: the first whose client
// connections (cons) list its session sid ("0x...") or, when sid is empty or not
// hex, its address addr (servers on real hosts see every worker at this machine's
// address: only the session tells them apart).
func (e *Ensemble) ServerOf(ctx context.Context, addr netip.Addr, sid string) (int, bool) {
	needles := []string{"/" + addr.String() + ":"}
	if v, err := strconv.ParseUint(strings.TrimPrefix(sid, "0x"), 16, 64); err == nil && sid != "" {
		needles = []string{fmt.Sprintf("sid=0x%x,", v), fmt.Sprintf("sid=0x%x)", v)}
	}
	for _, s := range e.Servers {
		text, err := e.fourLetter(ctx, s, "cons")
		if err == nil && slices.ContainsFunc(needles, func(n string) bool { return strings.Contains(text, n) }) {
			return s.ID, true
		}
	}
	return 0, false
}

// Leader is the id of the server that reports itself leader.
func (e *Ensemble) Leader(ctx context.Context) (int, bool) {
	if s := e.LeaderServer(ctx); s != nil {
		return s.ID, true
	}
	return 0, false
}

// LeaderServer returns the server that reports itself leader, or nil.
func (e *Ensemble) LeaderServer(ctx context.Context) *Server {
	for _, st := range e.Statuses(ctx) {
		if st.Mode == "leader" {
			return e.Servers[st.ID-1]
		}
	}
	return nil
}

// WaitServing waits until there is a leader and every server serves. On timeout the
// error names each server that is not serving and the tail of its log.
func (e *Ensemble) WaitServing(ctx context.Context, timeout time.Duration) error {
	return lockservice.WaitServing(ctx, timeout, 100*time.Millisecond, "ensemble not serving", "no quorum", func() lockservice.ServingPoll {
		sts := e.Statuses(ctx)
		leader, all := false, true
		for _, st := range sts {
			leader = leader || st.Mode == "leader" || st.Mode == "standalone" || e.external
			all = all && st.Serving()
		}
		p := lockservice.ServingPoll{OK: leader && all}
		for _, st := range sts {
			if st.Serving() {
				continue
			}
			s := e.Servers[st.ID-1]
			p.Down = append(p.Down, lockservice.DownServer{What: s.What("server"), Why: st.Error, Host: s.Host, Log: s.Log})
			// Only a server that does not serve may have exited (asking a host over
			// SSH for its pid costs a round trip).
			if !p.OK && p.Exited == "" && !e.external && s.Host.Pid() == 0 {
				p.Exited = fmt.Sprintf("server %d exited", s.ID)
			}
		}
		return p
	})
}

// Nodes are the servers as the nemesis addresses them. Not lockservice.Nodes: a
// ZooKeeper node says whether it observes, and names no client port (the nemesis's
// default is 2181; an existing ensemble's servers take no server-side fault).
func (e *Ensemble) Nodes() []nemesis.Server {
	out := make([]nemesis.Server, len(e.Servers))
	for i, s := range e.Servers {
		out[i] = nemesis.Server{ID: s.ID, Host: s.Host, Observer: s.Role == Observer}
	}
	return out
}

// Managed is false for an existing ensemble (ConnectEnsemble).
func (e *Ensemble) Managed() bool { return !e.external }

// Connect is the client connection string for all servers.
func (e *Ensemble) Connect() string {
	return strings.Join(lockservice.ClientAddrs(e.Servers), ",")
}

// Close ends the ensemble: each server's srvr answer (its mode: leader, follower or
// observer) saved as srvr.txt beside its log, then Stop; a remote ensemble has its own
// shutdown (the same answers, then copy the servers' files back, stop them, remove the
// node directories).
func (e *Ensemble) Close() error {
	if e.shutdown != nil {
		return e.shutdown()
	}
	var errs []error
	if !e.external {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, s := range e.Servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := e.saveSrvr(ctx, s)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	e.Stop()
	return errors.Join(errs...)
}

// saveSrvr writes server s's srvr answer (or why there is none) into s.Dir/srvr.txt.
func (e *Ensemble) saveSrvr(ctx context.Context, s *Server) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	srvr, err := e.fourLetter(ctx, s, "srvr")
	if err != nil {
		srvr = "(" + err.Error() + ")\n"
	}
	return os.WriteFile(filepath.Join(s.Dir, srvrFile), []byte(srvr), 0o644)
}

// srvrFile is the name of the file, in each server's directory of a run, that keeps
// the server's srvr answer at the end of the run (its Mode: leader, follower,
// observer).
const srvrFile = "srvr.txt"

// Stop kills every server.
func (e *Ensemble) Stop() {
	for _, s := range e.Servers {
		_ = s.Host.Kill(context.Background())
	}
}

// Version asks a server which ZooKeeper version it runs ("" if none answers).
func (e *Ensemble) Version(ctx context.Context) string {
	for _, s := range e.Servers {
		text, err := e.fourLetter(ctx, s, "srvr")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
				v, _, _ = strings.Cut(v, ",")
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}
