package recipes

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/internal/npm"
	"github.com/zlockcheck/zlockcheck/internal/pypi"
	"github.com/zlockcheck/zlockcheck/recipes/curator"
	"github.com/zlockcheck/zlockcheck/recipes/jvm"
	nodeworkers "github.com/zlockcheck/zlockcheck/recipes/node"
	pyworkers "github.com/zlockcheck/zlockcheck/recipes/python"
)

// CommandEnv is what building a worker command line needs from the caller.
type CommandEnv struct {
	// Self is the zlockcheck binary, which serves InProcess recipes (`worker`).
	Self string
	// CacheDir receives the unpacked and built Java and Python workers (CacheDir).
	CacheDir string
	// JavaDir holds Debian's jars; "" means /usr/share/java. The worker scripts read
	// the same directory from $ZLC_JAVA_DIR.
	JavaDir string
	// Log receives progress (compiling the Curator worker); nil discards it.
	Log io.Writer
}

// Command returns the command line of one worker of the recipe. For a Java, Python or
// Node recipe it first checks that what the worker needs is installed (the error
// names the Debian packages to install) and unpacks the worker into env.CacheDir,
// compiling the Java workers on first use (against Debian's Curator, or against a
// library release fetched from Maven Central into the cache: Library.Maven), and
// installing a Python or Node worker's libraries from their registry on first use.
func (r Entry) Command(ctx context.Context, env CommandEnv) ([]string, error) {
	if err := r.Runtime.check(env, r.Library.fetched()); err != nil {
		return nil, fmt.Errorf("recipe %s: %w", r.Name, err)
	}
	switch r.Runtime {
	case InProcess:
		return []string{env.Self, "worker", "--recipe", r.Name}, nil
	case Java:
		if r.Worker != "" {
			return jvmWorker(ctx, env, r.Library.Maven, r.Worker, r.WorkerRecipe())
		}
		dir, err := curatorWorker(ctx, env, r.Library.Maven)
		if err != nil {
			return nil, err
		}
		return []string{filepath.Join(dir, "run.sh"), filepath.Join(dir, "build"), r.WorkerRecipe()}, nil
	case Python:
		if env.CacheDir == "" {
			return nil, errNoCacheDir
		}
		if r.Library.PyPI != "" {
			return pythonWorker(ctx, env, r.Worker, r.WorkerRecipe())
		}
		u, err := unpack(env.CacheDir, "python-workers", nil, pyworkers.Files())
		if err != nil {
			return nil, err
		}
		// Debian's python3, which has python3-kazoo (a pyenv or venv python3 earlier on
		// the PATH usually has not).
		return []string{pypi.Python, filepath.Join(u.Dir, r.Worker), r.WorkerRecipe()}, nil
	case Node:
		if env.CacheDir == "" {
			return nil, errNoCacheDir
		}
		return nodeWorker(ctx, env, r.Worker, r.WorkerRecipe())
	}
	return nil, fmt.Errorf("recipe %s: unknown runtime %q", r.Name, r.Runtime)
}

// curatorWorker unpacks and compiles the Curator worker into the cache (once per
// content) and returns its directory: run.sh and the other scripts, build/ the classes.
// The process that put the directory in place then records the class-data-sharing
// archive there (cds.sh), which must be made where the jar stays. release, when set,
// is a profile of recipes/jvm/pom.xml: its jars are fetched into the cache and linked
// as the directory's lib/, which the scripts then use in place of Debian's.
func curatorWorker(ctx context.Context, env CommandEnv, release string) (string, error) {
	if env.CacheDir == "" {
		return "", errNoCacheDir
	}
	name, lib := "curator", ""
	if release != "" {
		dir, err := jvm.Fetch(ctx, maven.Config{CacheDir: env.CacheDir, Log: env.Log}, release)
		if err != nil {
			return "", err
		}
		name, lib = "curator-"+filepath.Base(dir), filepath.Join(dir, "lib")
	}
	logw := env.Log
	if logw == nil {
		logw = io.Discard
	}
	script := func(dir, name string, extraEnv ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, name), filepath.Join(dir, "build"))
		cmd.Env = append(os.Environ(), extraEnv...)
		if env.JavaDir != "" {
			cmd.Env = append(cmd.Env, "ZLC_JAVA_DIR="+env.JavaDir)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("the Curator worker: %s: %w\n%s", name, err, out)
		}
		return nil
	}
	// The scripts and the Java sources (the worker and the protocol it shares with the
	// other JVM workers) side by side, as build.sh looks for them.
	u, err := unpack(env.CacheDir, name, func(tmp string) error {
		if lib != "" {
			if err := os.Symlink(lib, filepath.Join(tmp, "lib")); err != nil {
				return fmt.Errorf("the Curator worker: %w", err)
			}
		}
		fmt.Fprintf(logw, "compiling the Curator worker into %s\n", env.CacheDir)
		return script(tmp, "build.sh", "ZLC_NO_CDS=1")
	}, curator.Files(), jvm.Sources())
	if err != nil {
		return "", err
	}
	if u.Fresh {
		// Without the archive a worker starts a little slower; cds.sh never fails the build.
		if err := script(u.Dir, "cds.sh"); err != nil {
			fmt.Fprintf(logw, "%v\n", err)
		}
	}
	return u.Dir, nil
}

// jvmWorker is the command line of one worker of recipes/jvm (main class main, told
// recipe), compiled against release's jars (a profile of recipes/jvm/pom.xml): the
// jars are fetched into the cache and the workers unpacked and compiled there, each
// once (the directory's name says the release and the sources' hash).
func jvmWorker(ctx context.Context, env CommandEnv, release, main, recipe string) ([]string, error) {
	if env.CacheDir == "" {
		return nil, errNoCacheDir
	}
	libDir, err := jvm.Fetch(ctx, maven.Config{CacheDir: env.CacheDir, Log: env.Log}, release)
	if err != nil {
		return nil, err
	}
	lib := filepath.Join(libDir, "lib")
	u, err := unpack(env.CacheDir, "workers-"+filepath.Base(libDir)+"-"+main, func(tmp string) error {
		if env.Log != nil {
			fmt.Fprintf(env.Log, "compiling the JVM worker %s for %s into %s\n", main, release, env.CacheDir)
		}
		return jvm.Compile(ctx, tmp, lib, main)
	}, jvm.Sources())
	if err != nil {
		return nil, err
	}
	return jvm.Argv(u.Dir, lib, main, recipe), nil
}

// pythonWorker is the command line of one worker of recipes/python (script worker,
// told recipe): the environment with the pinned libraries is made in the cache and
// the scripts unpacked there, each once; the worker runs on the environment's
// interpreter.
func pythonWorker(ctx context.Context, env CommandEnv, worker, recipe string) ([]string, error) {
	venv, err := pypi.Venv(ctx, pypi.Config{CacheDir: env.CacheDir, Log: env.Log}, pyworkers.Requirements())
	if err != nil {
		return nil, err
	}
	u, err := unpack(env.CacheDir, "python-workers", nil, pyworkers.Files())
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(venv, "bin", "python"), filepath.Join(u.Dir, worker), recipe}, nil
}

// nodeWorker is the command line of one worker of recipes/node (script worker, told
// recipe): the pinned libraries are installed in the cache (npm ci) and the scripts
// unpacked beside a link to their node_modules, each once (the scripts' directory is
// named by the install it links to and by their content); the worker runs on the
// machine's node.
func nodeWorker(ctx context.Context, env CommandEnv, worker, recipe string) ([]string, error) {
	cfg := npm.Config{CacheDir: env.CacheDir, Log: env.Log}
	node, err := npm.Program(cfg, "node")
	if err != nil {
		return nil, err
	}
	dir, err := npm.Install(ctx, cfg, nodeworkers.Lock())
	if err != nil {
		return nil, err
	}
	modules := filepath.Join(dir, "node_modules")
	u, err := unpack(env.CacheDir, "node-workers-"+strings.TrimPrefix(filepath.Base(dir), "node-npm-"), func(tmp string) error {
		if err := os.Symlink(modules, filepath.Join(tmp, "node_modules")); err != nil {
			return fmt.Errorf("the Node workers: %w", err)
		}
		return nil
	}, nodeworkers.Files())
	if err != nil {
		return nil, err
	}
	return []string{node, filepath.Join(u.Dir, worker), recipe}, nil
}

// need is one thing a worker runtime needs from the machine and the Debian package
// that provides it.
type need struct {
	// command is looked up on $PATH; file (under the Java directory when relative)
	// must exist; module is a Python module Debian's python3 must import.
	command, file, module string
	pkg                   string
}

// needs lists what the runtime's workers need, in the order they are checked; a
// worker of libraries fetched from a registry (fetched) needs what fetches them, not
// Debian's packages of them: a Java worker of a release from Maven Central needs
// Maven, a Python worker of PyPI's libraries Debian's venv module.
func (rt Runtime) needs(fetched bool) []need {
	switch rt {
	case Java:
		list := []need{
			{command: "java", pkg: "default-jdk-headless"},
			{command: "javac", pkg: "default-jdk-headless"},
			{command: "jar", pkg: "default-jdk-headless"},
		}
		if fetched {
			// The release's jars come from Maven Central (recipes/jvm/pom.xml), fetched
			// into the cache by make setup or on first use.
			return append(list, need{command: "mvn", pkg: "maven"})
		}
		// libcurator-recipes-java depends on the rest (as the Makefile's setup
		// installs it); slf4j-simple, the worker's logger, is libslf4j-java's.
		for _, j := range []struct{ jar, pkg string }{
			{"curator-recipes", "libcurator-recipes-java"}, {"curator-framework", "libcurator-recipes-java"},
			{"curator-client", "libcurator-recipes-java"}, {"zookeeper", "libcurator-recipes-java"},
			{"zookeeper-jute", "libcurator-recipes-java"}, {"guava", "libcurator-recipes-java"},
			{"slf4j-api", "libslf4j-java"}, {"slf4j-simple", "libslf4j-java"},
		} {
			list = append(list, need{file: j.jar + ".jar", pkg: j.pkg})
		}
		return list
	case Python:
		if fetched {
			// The libraries come from PyPI (recipes/python/requirements.txt), installed
			// into a virtual environment in the cache by make setup or on first use.
			return []need{{file: pypi.Python, pkg: "python3"}, {module: "ensurepip", pkg: "python3-venv"}}
		}
		return []need{{file: pypi.Python, pkg: "python3"}, {module: "kazoo", pkg: "python3-kazoo"}}
	case Node:
		// The libraries come from the npm registry (recipes/node/package-lock.json),
		// installed into the cache by make setup or on first use; NodeSource's nodejs
		// package (Node.js 20) carries npm, Debian's has it apart.
		return []need{{command: "node", pkg: "nodejs"}, {command: "npm", pkg: "nodejs"}}
	}
	return nil
}

// Packages lists the Debian packages the recipe's worker needs, without duplicates;
// none for an InProcess recipe.
func (r Entry) Packages() []string {
	var pkgs []string
	for _, n := range r.Runtime.needs(r.Library.fetched()) {
		if !slices.Contains(pkgs, n.pkg) {
			pkgs = append(pkgs, n.pkg)
		}
	}
	return pkgs
}

// check reports what the runtime needs and is missing, as one error that says which
// Debian packages to install (maven: as needs).
func (rt Runtime) check(env CommandEnv, fetched bool) error {
	javaDir := env.JavaDir
	if javaDir == "" {
		javaDir = "/usr/share/java"
	}
	var missing, pkgs []string
	for _, n := range rt.needs(fetched) {
		var what string
		switch {
		case n.command != "":
			if _, err := exec.LookPath(n.command); err != nil {
				what = n.command + " (not on $PATH)"
			}
		case n.file != "":
			f := n.file
			if !filepath.IsAbs(f) {
				f = filepath.Join(javaDir, f)
			}
			if _, err := os.Stat(f); err != nil {
				what = f
			}
		case n.module != "":
			if slices.Contains(pkgs, "python3") || exec.Command(pypi.Python, "-c", "import "+n.module).Run() != nil {
				what = "the Python module " + n.module + " (for " + pypi.Python + ")"
			}
		}
		if what == "" {
			continue
		}
		missing = append(missing, what)
		if !slices.Contains(pkgs, n.pkg) {
			pkgs = append(pkgs, n.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	worker := map[Runtime]string{Java: "the Curator worker (Java)", Python: "the Kazoo worker (Python)"}[rt]
	if fetched {
		worker = map[Runtime]string{Java: "the JVM workers (Maven Central)", Python: "the Python workers (PyPI)", Node: "the Node workers (npm)"}[rt]
	}
	return fmt.Errorf("%s needs %s: apt-get install %s", worker, strings.Join(missing, ", "), strings.Join(pkgs, " "))
}
