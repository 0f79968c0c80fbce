// Package jvm carries the JVM workers inside the zlockcheck binary: the build
// manifest of the libraries fetched from Maven Central (pom.xml: one profile per
// library release), the one implementation of the worker protocol every JVM worker
// shares (ZlcWorker.java) and a worker per library (ZlcCuratorWorker.java,
// ZlcRedissonWorker.java, ZlcSpringWorker.java). Package recipes fetches a profile's
// jars (internal/maven), compiles a worker against them (Compile) and runs it (Argv);
// the Curator worker is built by recipes/curator's scripts instead, against Debian's
// Curator or a release's jars. `zlockcheck fetch` fetches every profile.
package jvm

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/zlockcheck/zlockcheck/internal/maven"
)

//go:embed pom.xml
var pom []byte

// lock is the SHA-256 of every jar of each profile (maven.Manifest.Lock).
//
//go:embed pom.lock
var lock []byte

//go:embed *.java
var sources embed.FS

// Sources are the workers' Java sources, which Compile builds together.
func Sources() fs.FS { return sources }

// Compile compiles worker main (ZlcRedissonWorker) and the protocol it speaks, of the
// sources in dir (an unpacked copy of Sources), against lib's jars into dir/build:
// each worker compiles against its own library's jars only.
func Compile(ctx context.Context, dir, lib, main string) error {
	var files []string
	for _, name := range []string{"ZlcWorker.java", main + ".java"} {
		f := filepath.Join(dir, name)
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("the JVM workers: no %s in %s", name, dir)
		}
		files = append(files, f)
	}
	// --release 17: class files for any JRE >= 17. -classfile: some libraries' jars
	// name annotation classes they do not ship (a warning about their jars).
	args := append([]string{"--release", "17", "-Xlint:all,-serial,-processing,-path,-classfile", "-Werror",
		"-encoding", "UTF-8", "-cp", filepath.Join(lib, "*"), "-d", filepath.Join(dir, "build")}, files...)
	if out, err := exec.CommandContext(ctx, "javac", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("the JVM workers: javac: %w\n%s", err, out)
	}
	return nil
}

// Argv is the command line of one worker: main class main of the classes Compile put
// in dir/build, with lib's jars, serving recipe. The flags are the Curator worker's
// (recipes/curator/classpath.sh says why), with a larger heap for a client that
// keeps a connection pool.
func Argv(dir, lib, main, recipe string) []string {
	return []string{"java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx192m",
		"-XX:+DisplayVMOutputToStderr", "-Xlog:disable", "-Xlog:all=warning:stderr",
		"-cp", filepath.Join(dir, "build") + ":" + filepath.Join(lib, "*"), main, recipe}
}

// Manifest is pom.xml, with its lock file pom.lock: the library releases the Java
// workers can run, one profile each (its id, e.g. "curator-5.9.0", is what recipes.Library.Maven names).
func Manifest() maven.Manifest {
	return maven.Manifest{Name: "jvm", POM: pom, Lock: lock, LockFile: "recipes/jvm/pom.lock"}
}

// Fetch is the directory of profile's jars (DIR/lib/*.jar), fetched on first use.
func Fetch(ctx context.Context, cfg maven.Config, profile string) (string, error) {
	return maven.Fetch(ctx, cfg, Manifest(), profile)
}

// FetchAll fetches every profile (make setup): a run then downloads nothing.
func FetchAll(ctx context.Context, cfg maven.Config) error {
	ids, err := Manifest().Profiles()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := Fetch(ctx, cfg, id); err != nil {
			return err
		}
	}
	return nil
}
