package lockservice

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// Local is a private server of one kind on 127.0.0.1, in the host's own network (no
// namespace, no root needed), that `zlockcheck conformance` holds one worker program
// to the protocol against: a worker's first check, before a run.
type Local interface {
	// Connect is init's connect for this server, as a run's would be for one server.
	Connect() string
	// End ends the hold h from the server's side, as the service ends one on its
	// own: a ZooKeeper session expired, a database connection terminated, a Redis
	// key's TTL run out. A CannotEnd error says h told too little to aim at.
	End(ctx context.Context, h Holder) (Ending, error)
	// Close stops the server and removes its files.
	Close() error
}

// Holder is what a worker told of the lock it holds.
type Holder struct {
	// Session and Passwd are from its last session event (Passwd: ZooKeeper's).
	Session, Passwd string
	// Place is where its acquire said the lock lives (the zero value: it did not).
	Place workloads.LockPlace
}

// Ending says how End ended a hold.
type Ending struct {
	// Did is what was done, for the rule's transcript.
	Did string
	// MustReport: the worker's client keeps what ended (a ZooKeeper session, the
	// database connection that held the lock) and can learn it within the session
	// timeout, so a worker that does not report lost has missed it. False for a
	// lease the library may have no way to see end before its next renewal (a Redis
	// key's TTL run out under it).
	MustReport bool
}

// CannotEnd is End's error when the holder told too little to aim at: why, in a
// sentence that says what the worker could send.
type CannotEnd string

func (c CannotEnd) Error() string { return string(c) }

// LocalConfig says how to start a Local.
type LocalConfig struct {
	// Dir is the server's own directory (made if missing); Close removes it. ""
	// makes one under the system's temporary directory (LocalDirPattern), which the
	// sweep removes once its owner is gone.
	Dir string
	// Settings are the kind's own (nil: its defaults).
	Settings Settings
	// SessionTimeout is what the workers are sent in init.
	SessionTimeout time.Duration
}

// LocalFunc starts a Local of one kind.
type LocalFunc func(ctx context.Context, cfg LocalConfig) (Local, error)

// locals holds each kind's Local: written at start (init), read after.
var locals = map[kind.Name]LocalFunc{}

// RegisterLocal records how a private server of kind n starts. Call it once, from
// the kind's package's init.
func RegisterLocal(n kind.Name, start LocalFunc) {
	if _, taken := locals[n]; taken || start == nil {
		panic(fmt.Sprintf("lockservice: a second or nil local server for %q", n))
	}
	locals[n] = start
}

// LocalKinds lists the kinds that have a Local, in the catalogue's order.
func LocalKinds() []kind.Name {
	var out []kind.Name
	for _, k := range kind.All() {
		if locals[k.Name] != nil {
			out = append(out, k.Name)
		}
	}
	return out
}

// StartLocal starts a private server of kind n.
func StartLocal(ctx context.Context, n kind.Name, cfg LocalConfig) (Local, error) {
	start, ok := locals[kind.Of(n).Name]
	if !ok {
		var names []string
		for _, k := range LocalKinds() {
			names = append(names, string(k))
		}
		return nil, fmt.Errorf("service %s: no private server to check a worker against (services that have one: %s)", kind.Of(n).Title, strings.Join(names, ", "))
	}
	if cfg.Settings != nil && !Fits(n, cfg.Settings) {
		return nil, fmt.Errorf("local server: settings of type %T for the %s service", cfg.Settings, kind.Of(n).Title)
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, err
		}
		return start(ctx, cfg)
	}
	dir, owner, err := ownedLocalDir(n)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	l, err := start(ctx, cfg)
	if err != nil {
		owner.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return ownedLocal{Local: l, owner: owner}, nil
}

// LocalDirPattern names the directories StartLocal makes for a Local's files, in
// the system's temporary directory: the kind's name follows it.
const LocalDirPattern = "zlc-local-"

// localOwnerFile, in such a directory, is locked (flock) by the process that made
// it for as long as it lives.
const localOwnerFile = "owner.lock"

// ownedLocalDir makes a directory for a Local of kind n, and locks its owner file.
func ownedLocalDir(n kind.Name) (string, *os.File, error) {
	dir, err := os.MkdirTemp("", LocalDirPattern+string(kind.Of(n).Name)+".")
	if err != nil {
		return "", nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, localOwnerFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("local server: lock its directory's owner file: %w", err)
	}
	return dir, f, nil
}

// ownedLocal is a Local in a directory StartLocal made: Close lets go of it too.
type ownedLocal struct {
	Local
	owner *os.File
}

func (o ownedLocal) Close() error {
	err := o.Local.Close()
	o.owner.Close()
	return err
}

// InLiveLocal reports whether path is in the directory of a Local whose owner lives
// (StartLocal's, LocalDirPattern): a kind's sweep leaves its servers alone, as they
// run outside any run's namespace by design.
func InLiveLocal(path string) bool {
	for dir := filepath.Clean(path); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if !strings.HasPrefix(filepath.Base(dir), LocalDirPattern) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, localOwnerFile))
		if err != nil {
			return false
		}
		defer f.Close()
		// The owner holds an exclusive lock: a shared one is refused while it lives.
		return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil
	}
	return false
}

// sweepLocals removes the directories of Locals whose owner is gone (killed before
// it could Close them); their servers died with it (Pdeathsig).
func sweepLocals() ([]Leftover, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), LocalDirPattern+"*"))
	if err != nil {
		return nil, err
	}
	var out []Leftover
	var errs []error
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, localOwnerFile))
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			f.Close()
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if st, err := os.Stat(dir); err != nil || time.Since(st.ModTime()) < time.Minute {
				continue // being made: the owner file comes right after the directory
			}
		case err != nil:
			continue // its owner lives (or it is not ours to judge)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), LocalDirPattern), ".")
		out = append(out, Leftover{Kind: kind.Name(n), Short: filepath.Base(dir), Line: "removed " + dir + ": the private server's owner was gone"})
	}
	return out, errors.Join(errs...)
}

// LocalProcess is one server process of a Local: its own process group, killed if
// this process dies first (Pdeathsig), its output appended to Log.
type LocalProcess struct {
	// Name says which server it is in errors ("private Redis on 127.0.0.1:40123").
	Name string
	// Log is the process's output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartLocalProcess starts argv with its output in log.
func StartLocalProcess(name string, argv []string, log string) (*LocalProcess, error) {
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &LocalProcess{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// WaitServing polls serving until it answers nil, the process exits or timeout
// passes; the error then carries the tail of the log.
func (p *LocalProcess) WaitServing(ctx context.Context, timeout time.Duration, serving func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := serving(ctx)
		if err == nil {
			return nil
		}
		why := ""
		select {
		case <-p.done:
			why = "it exited"
		default:
			if time.Now().After(deadline) {
				why = fmt.Sprintf("not serving within %s (%v)", timeout, err)
			}
		}
		if why != "" {
			return fmt.Errorf("%s: %s; last lines of %s:\n    %s", p.Name, why, p.Log, strings.Join(TailLines(p.Log, 8), "\n    "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends sig to the process group, then SIGKILL if it has not exited within
// grace, and waits for the process.
func (p *LocalProcess) Stop(sig syscall.Signal, grace time.Duration) {
	if p == nil || p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// FreeLocalPort asks the kernel for a free TCP port on 127.0.0.1.
func FreeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// LocalSettings is cfg's settings for kind n: its own, or the kind's Zero.
func LocalSettings(n kind.Name, cfg LocalConfig) Settings {
	if cfg.Settings != nil {
		return cfg.Settings
	}
	if spec, ok := SettingsOf(n); ok {
		return spec.Zero
	}
	return nil
}
