package testnodes

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/zlockcheck/zlockcheck/internal/sshnode"
)

// LocalShell is a fake SSH node for unit tests: it runs a host's scripts with this
// machine's sh, as sshd would run them with the login shell, so the scripts (pid
// file, process group, signals, quoting) are tested without SSH.
type LocalShell struct{}

func (LocalShell) String() string { return "local" }

func (LocalShell) Run(ctx context.Context, c sshnode.Cmd) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", c.Script)
	cmd.Stdin = bytes.NewReader(c.Stdin)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, &sshnode.Error{Node: "local", What: c.What, Status: ee.ExitCode(), Output: string(out)}
	}
	return out, err
}

func (l LocalShell) Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	return l.Run(ctx, sshnode.Cmd{Script: sshnode.QuoteArgv(argv), Stdin: stdin})
}

func (LocalShell) ReadFile(_ context.Context, file string) ([]byte, error) { return os.ReadFile(file) }

func (LocalShell) WriteFile(_ context.Context, file string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, data, perm)
}
