module github.com/zlockcheck/zlockcheck

go 1.26.8

require golang.org/x/sys v0.49.0

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
