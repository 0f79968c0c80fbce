package sqldb

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// takePort starts, through command (a namespace's), a python3 process that listens on
// addr:port until the test ends, and returns once it has bound the port: a loaded
// machine starts python3 slowly, and a server started before it would take the port.
func takePort(t *testing.T, command func(argv ...string) *exec.Cmd, addr string, port int) {
	t.Helper()
	// SO_REUSEADDR: the killed server's connections may linger in TIME_WAIT; a second
	// listener is refused all the same. Bind is retried while the port is freed.
	script := "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n" +
		"for i in range(100):\n    try:\n        s.bind(('" + addr + "', " + strconv.Itoa(port) + "))\n        break\n" +
		"    except OSError:\n        time.sleep(0.1)\ns.listen()\nprint('bound', flush=True)\ntime.sleep(60)\n"
	taken := command("python3", "-c", script)
	out, err := taken.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := taken.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Process.Kill(); _ = taken.Wait() })
	bound := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		bound <- line
	}()
	select {
	case line := <-bound:
		if !strings.HasPrefix(line, "bound") {
			t.Fatalf("the process taking %s:%d said %q", addr, port, line)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the process taking %s:%d did not bind in 20 s", addr, port)
	}
}
