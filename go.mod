module github.com/zlockcheck/zlockcheck

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/go-zookeeper/zk v1.0.4
	golang.org/x/sys v0.49.0
	pgregory.net/rapid v1.3.0
)

require gopkg.in/yaml.v3 v3.0.1 // indirect
