package fourletter

import (
	"net"
	"testing"
)

// A FAKE server on a pipe: Ask writes the word and reads the answer to the close.
func TestAskReadsTheWholeAnswer(t *testing.T) {
	client, server := net.Pipe()
	go func() {
		buf := make([]byte, 4)
		_, _ = server.Read(buf)
		if string(buf) == "srvr" {
			_, _ = server.Write([]byte("Zookeeper version: 3.8.0\n"))
			_, _ = server.Write([]byte("Mode: leader\n"))
		}
		server.Close()
	}()
	got, err := Ask(client, "srvr")
	if err != nil || got != "Zookeeper version: 3.8.0\nMode: leader\n" {
		t.Fatalf("Ask = %q, %v", got, err)
	}
}

func TestAskReportsAWriteError(t *testing.T) {
	client, server := net.Pipe()
	server.Close()
	if _, err := Ask(client, "srvr"); err == nil {
		t.Fatal("Ask on a closed connection: no error")
	}
}
