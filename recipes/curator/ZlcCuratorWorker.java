// ZlcCuratorWorker: a zlockcheck worker (worker protocol v2, and v1) for Apache Curator's lock
// recipes, as shipped by Debian (libcurator-recipes-java 5.4), and compiled unchanged against
// Curator 5.9.0 from Maven Central for the curator-5.9-* recipes (recipes/jvm/pom.xml; the
// catalogue tells this worker the base recipe's name). Build and run it with build.sh /
// run.sh next to this file (README.md).
//
// Usage: java -cp "$(recipes/curator/classpath.sh OUTDIR)" ZlcCuratorWorker RECIPE
//
//   curator-mutex      InterProcessMutex                kinds: mutex, counter
//   curator-semaphore  InterProcessSemaphoreV2(permits) kinds: semaphore
//   curator-rwlock     InterProcessReadWriteLock        kinds: rwlock (mode read|write)
//   curator-reentrant  InterProcessMutex, re-entered    kinds: reentrant, mutex
//
// stdin carries the harness's requests, stdout only protocol lines (replies and
// events, one JSON object a line), stderr every log line (slf4j-simple).
//
// The client: CuratorFrameworkFactory with the init's connect string, session timeout
// S, connection timeout S, retry policy RetryUntilElapsed(S, 100 ms) (every Curator
// operation gives up after about 2 S without a usable connection) and no ensemble
// tracker. init waits at most 2 S for the first session; no session is "info" (the
// ensemble may be unreachable for now), a configuration the recipe cannot run is
// "fail".
//
// Ops:
//   acquire  acquire(timeout) on the recipe (rwlock: readLock()/writeLock() by mode).
//            false/null is fail "timeout" (Curator deleted its node; a semaphore lease
//            it could not delete is left to the janitor: it only costs a permit). ok
//            carries token = czxid of our lock node, found as the newest child of the
//            lock path (semaphore: the lease node) whose ephemeral owner is our
//            session. If the connection was suspended during the acquire, the grant
//            counts only if that node was seen afterwards, in the same session, with
//            no suspension since; else info (the node goes to the janitor, or, when it
//            was not found, Curator's own release deletes it). curator-mutex refuses an acquire while
//            holding (fail: InterProcessMutex would re-enter); curator-reentrant
//            re-enters (one level more, same node and token), as do semaphore (one
//            lease more) and rwlock.
//   release  the innermost level: first checks that its node still exists and is
//            owned by the current session (else fail "not held", and every level is
//            given up), then mutex.release() / lease.close() (not returnLease, which
//            swallows errors). Nothing held: fail "not held". Errors: info.
//   read     (kind counter, while holding) getData(counter_path): ok value (missing or
//            empty node: 0); connection trouble: info.
//   write    (kind counter, while holding) setData(counter_path), creating it if
//            missing; fenced: one multi of check(our lock node) + setData (or create),
//            which fails "fenced: lock node gone" once our node is gone. Counter ops go
//            through the session's ZooKeeper handle, not Curator's retrying builders; a
//            write whose outcome is unknown is retried (100 ms apart) for init's
//            write_retry_ms, as an application's retry loop would, then info.
//   clock    (v2) ok with mono_ns = System.nanoTime().
//   cycle    (v2) acquire depth times (as above), hold hold_us, release as often as
//            acquired, on the main thread, each step reported as it happens: an invoke
//            report is written before the op starts, its outcome right after. A lost
//            event while holding with nothing in flight ends the cycle (no release).
//            Then the reply ok. v2 is agreed at init: the harness offers "protocol":2,
//            the ok reply says "protocol":2; without the offer, clock and cycle are
//            out of protocol.
//   close    closes the client (ends the session; bounded to 1.5 s), replies, exits 0.
//            EOF on stdin: the same, without a reply; a request still running 200 ms
//            after EOF is abandoned. A malformed or out-of-protocol line: exit 1.
//
// Events: Curator's ConnectionStateListener. SUSPENDED, LOST (or READ_ONLY) while
// holding anything sends one "lost" event and gives every hold up (their nodes go to
// the janitor, the recipe objects are replaced before the next acquire, since Curator
// keeps per-thread hold counts). A lost event while an op that relies on the hold is
// in flight (read, write, a nested acquire, a release with levels left) makes that op
// answer info at once, since the harness ignores events while an op is in flight. A
// new session id after (RE)CONNECTED sends a "session" event (id and password from
// the ZooKeeper handle); init's session is sent right after init's reply.
//
// Threads:
//   main          reads requests (via the reader thread's queue) and answers them, one
//                 at a time; it waits for the lock thread, so it can answer "info" at
//                 once when the lock is lost while an op that relies on it runs.
//   zlc-lock      runs every ZooKeeper/Curator call of an op. It is always the same
//                 thread, which InterProcessMutex needs (its ownership is per thread).
//   zlc-janitor   deletes lock nodes of holds that were given up as lost but may still
//                 exist (a session that survived a SUSPENDED), so they block no one;
//                 only nodes still owned by the session that created them.
//   zlc-stdin     reads stdin; on EOF it makes sure the worker closes and exits 0.

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.FutureTask;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.state.ConnectionStateListener;
import org.apache.curator.retry.RetryUntilElapsed;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class ZlcCuratorWorker {

    static final String[] RECIPES = {"curator-mutex", "curator-semaphore", "curator-rwlock", "curator-reentrant"};

    // ------------------------------------------------------------------ main

    public static void main(String[] args) throws Exception {
        // Before anything creates a logger: slf4j-simple writes to stderr only. Each
        // setting can be overridden with -D on the command line.
        setIfAbsent("org.slf4j.simpleLogger.logFile", "System.err");
        setIfAbsent("org.slf4j.simpleLogger.defaultLogLevel", "info");
        setIfAbsent("org.slf4j.simpleLogger.showDateTime", "true");
        setIfAbsent("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        setIfAbsent("org.slf4j.simpleLogger.showShortLogName", "true");
        // ZooKeeper's client dumps its whole environment at INFO on every connect.
        setIfAbsent("org.slf4j.simpleLogger.log.org.apache.zookeeper.ZooKeeper", "warn");
        // stdout belongs to the protocol: keep our own handle on fd 1 and point
        // System.out at stderr, so a stray println from any library cannot corrupt it.
        PrintStream proto = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        System.setOut(System.err);

        Logger log = LoggerFactory.getLogger("zlc.worker");
        if (args.length != 1) {
            log.error("usage: ZlcCuratorWorker RECIPE (one of {})", String.join(", ", RECIPES));
            System.err.flush();
            Runtime.getRuntime().halt(2);
        }
        ZlcCuratorWorker w = new ZlcCuratorWorker(args[0], proto, log);
        w.serve();
    }

    static void setIfAbsent(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    // ------------------------------------------------------------------ state

    final String recipe;
    final PrintStream proto;
    final Logger log;

    /** Guards everything below that the listener, janitor and op threads share. */
    final Object state = new Object();

    // Fixed by a successful init (written by the main thread before the lock thread or
    // listener can use them).
    volatile CuratorFramework client;
    /** The client an init is starting, so that a shutdown meanwhile closes it. */
    volatile CuratorFramework starting;
    String kind = "";
    String path = "";
    int permits = 1;
    String counterPath = "";
    boolean fenced;
    /** How long a counter write whose outcome is unknown is retried (init's write_retry_ms). */
    long writeRetryMs;
    int sessionTimeoutMs;
    int workerNo;
    /** The protocol version init agreed (2 when the harness offered it). */
    long protocol = 1;

    // Recipe objects; used by the lock thread only. Replaced after a hold was given up
    // without a clean release, because Curator's objects keep per-thread state.
    InterProcessMutex mutex;
    InterProcessSemaphoreV2 semaphore;
    InterProcessReadWriteLock rwlock;
    boolean dirty; // under state

    /** What is held, innermost last (a re-entered mutex has one entry per level). */
    final ArrayList<Hold> holds = new ArrayList<>();
    /** Counts SUSPENDED/LOST/READ_ONLY notifications. */
    long epoch;
    /** Counts lost events sent. */
    long lostSeq;
    String lostReason = "";
    /** Why the last hold ended without a release, while nothing new was acquired. */
    String lastLoss = "";
    /** Set when the session is being closed on purpose: no more events. */
    boolean closing;
    boolean initialized;
    long reportedSession;
    /** Lock nodes given up as lost that may still exist; the janitor deletes them. */
    final ArrayList<Stale> stale = new ArrayList<>();

    final ExecutorService lockThread = Executors.newSingleThreadExecutor(daemon("zlc-lock"));
    final ExecutorService janitorThread = Executors.newSingleThreadExecutor(daemon("zlc-janitor"));
    final AtomicBoolean janitorQueued = new AtomicBoolean();

    final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    static final String EOF = new String("<eof>");
    volatile boolean busy;
    final Object shutdownLock = new Object();

    static final class Hold {
        final String mode;              // "read", "write" or null
        final InterProcessMutex mutex;  // mutex, re-entered mutex, rwlock read/write lock
        final Lease lease;              // semaphore
        final long session;             // session id when acquired
        String node;                    // our lock node, null if not known
        long czxid;                     // its czxid, 0 if not known

        Hold(String mode, InterProcessMutex mutex, Lease lease, long session) {
            this.mode = mode;
            this.mutex = mutex;
            this.lease = lease;
            this.session = session;
        }
    }

    static final class Stale {
        final String node;
        final long session;

        Stale(String node, long session) {
            this.node = node;
            this.session = session;
        }
    }

    /** One reply. */
    static final class Reply {
        final String type;
        final String error;
        Long token;
        Long value;
        Long protocol;
        Long mono;

        Reply(String type, String error) {
            this.type = type;
            this.error = error;
        }

        static Reply ok() {
            return new Reply("ok", null);
        }

        static Reply fail(String msg) {
            return new Reply("fail", msg);
        }

        static Reply info(String msg) {
            return new Reply("info", msg);
        }
    }

    /** A request line that breaks the protocol: the worker exits 1. */
    static final class ProtocolError extends Exception {
        ProtocolError(String msg) {
            super(msg);
        }
    }

    ZlcCuratorWorker(String recipe, PrintStream proto, Logger log) {
        this.recipe = recipe;
        this.proto = proto;
        this.log = log;
    }

    static java.util.concurrent.ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }

    // ------------------------------------------------------------------ serving

    void serve() {
        if (!Arrays.asList(RECIPES).contains(recipe)) {
            log.error("unknown recipe {} (known: {}); every init will fail", recipe, String.join(", ", RECIPES));
        }
        Thread reader = new Thread(this::readStdin, "zlc-stdin");
        reader.setDaemon(true);
        reader.start();
        while (true) {
            String line;
            try {
                line = lines.take();
            } catch (InterruptedException e) {
                continue;
            }
            if (line == EOF) {
                log.info("stdin closed; closing");
                shutdown(0, null);
            }
            if (line.trim().isEmpty()) {
                continue;
            }
            busy = true;
            try {
                handle(line);
            } catch (ProtocolError e) {
                log.error("malformed or out-of-protocol request line {}: {}", abbreviate(line), e.getMessage());
                shutdown(1, null);
            } catch (Throwable t) {
                log.error("internal error on request line {}", abbreviate(line), t);
                shutdown(1, null);
            } finally {
                busy = false;
            }
        }
    }

    void readStdin() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                lines.add(line);
            }
        } catch (Exception e) {
            log.warn("reading stdin: {}", e.toString());
        }
        lines.add(EOF);
        // The main thread answers the requests read before EOF, then closes. If the
        // last one is still running 200 ms after EOF, it is abandoned (as the Go
        // workers cancel it): nobody is left to read its reply.
        int busyTicks = 0;
        while (true) {
            try {
                Thread.sleep(50);
            } catch (InterruptedException ignored) {
            }
            String head = lines.peek();
            if (head == null) {
                return; // the main thread took EOF
            }
            if (head == EOF && busy) {
                if (++busyTicks >= 4) {
                    log.info("stdin closed while a request runs; closing");
                    shutdown(0, null);
                }
            } else {
                busyTicks = 0;
            }
        }
    }

    static String abbreviate(String s) {
        return s.length() <= 300 ? s : s.substring(0, 300) + "...";
    }

    /** Closes the session (bounded), writes a final reply if any and halts. */
    void shutdown(int code, Long closeId) {
        synchronized (shutdownLock) {
            boolean clean = closeClient();
            if (closeId != null) {
                Reply r = clean ? Reply.ok() : Reply.info("closing the session did not finish within 1.5s");
                emitReply(closeId, r);
            }
            synchronized (proto) {
                proto.flush();
            }
            System.err.flush();
            Runtime.getRuntime().halt(code);
        }
    }

    /** Closes the client, waiting at most 1.5 s; true if it finished. */
    boolean closeClient() {
        CuratorFramework c;
        synchronized (state) {
            closing = true;
            c = client != null ? client : starting;
            holds.clear();
        }
        if (c == null) {
            return true;
        }
        return closeQuietly(c, 1500);
    }

    boolean closeQuietly(CuratorFramework c, long waitMs) {
        Thread t = new Thread(() -> {
            try {
                c.close();
            } catch (Throwable e) {
                log.warn("closing the client: {}", e.toString());
            }
        }, "zlc-close");
        t.setDaemon(true);
        t.start();
        try {
            t.join(waitMs);
        } catch (InterruptedException ignored) {
        }
        if (t.isAlive()) {
            log.warn("closing the client did not finish within {} ms", waitMs);
            return false;
        }
        return true;
    }

    void handle(String line) throws ProtocolError {
        Map<String, Object> req;
        try {
            Object v = Json.parse(line);
            if (!(v instanceof Map)) {
                throw new ProtocolError("not a JSON object");
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) v;
            req = m;
        } catch (IllegalArgumentException e) {
            throw new ProtocolError("not JSON: " + e.getMessage());
        }
        long id = reqLong(req, "id", null);
        String op = reqString(req, "op", null);
        if (op == null) {
            throw new ProtocolError("field op: missing");
        }
        switch (op) {
            case "init":
            case "acquire":
            case "release":
            case "close":
            case "read":
            case "clock":
            case "cycle":
                break;
            case "write":
                if (optLong(req, "value") == null) {
                    throw new ProtocolError("field value: write needs a value");
                }
                break;
            default:
                throw new ProtocolError("field op: unknown op \"" + op + "\"");
        }
        if (op.equals("close")) {
            log.info("request {}: close", id);
            shutdown(0, id);
            return;
        }
        if (op.equals("init")) {
            if (client != null) {
                throw new ProtocolError("request " + id + ": init twice");
            }
            Reply r = init(id, req);
            if (r.type.equals("ok") && reqLong(req, "protocol", 1L) >= 2) {
                protocol = 2;
                r.protocol = 2L;
            }
            log.info("request {}: init -> {}{} (protocol v{})", id, r.type, r.error != null ? " (" + r.error + ")" : "", protocol);
            emitReply(id, r);
            if (r.type.equals("ok")) {
                reportSession(true);
            }
            return;
        }
        if (client == null) {
            throw new ProtocolError("request " + id + ": " + op + " before a successful init");
        }
        if ((op.equals("clock") || op.equals("cycle")) && protocol < 2) {
            throw new ProtocolError("request " + id + ": " + op + " is protocol v2, and init agreed v1");
        }
        if (op.equals("clock")) {
            Reply r = Reply.ok();
            r.mono = System.nanoTime();
            emitReply(id, r);
            return;
        }
        if (op.equals("cycle")) {
            cycle(id, req);
            emitReply(id, Reply.ok());
            return;
        }
        long t0 = System.nanoTime();
        Reply r;
        switch (op) {
            case "acquire":
                r = acquire(req);
                break;
            case "release":
                r = release();
                break;
            case "read":
                r = counterRead();
                break;
            default:
                r = counterWrite(optLong(req, "value"));
                break;
        }
        log.info("request {}: {}{} -> {}{}{} ({} ms)", id, op,
                req.get("mode") instanceof String ? " " + req.get("mode") : "",
                r.type, r.error != null ? " (" + r.error + ")" : "",
                r.token != null ? " token " + r.token : (r.value != null ? " value " + r.value : ""),
                (System.nanoTime() - t0) / 1_000_000);
        emitReply(id, r);
    }

    // ------------------------------------------------------------------ output

    void emit(String line) {
        synchronized (proto) {
            proto.print(line);
            proto.print('\n');
            proto.flush();
            if (proto.checkError()) {
                // The harness is gone; stdin will see EOF too.
                log.warn("writing to stdout failed");
            }
        }
    }

    void emitReply(long id, Reply r) {
        Json.Obj o = new Json.Obj().num("id", id).str("type", r.type);
        if (r.error != null) {
            o.str("error", r.error);
        }
        if (r.type.equals("ok") && r.token != null) {
            o.num("token", r.token);
        }
        if (r.type.equals("ok") && r.value != null) {
            o.num("value", r.value);
        }
        if (r.type.equals("ok") && r.protocol != null) {
            o.num("protocol", r.protocol);
        }
        if (r.type.equals("ok") && r.mono != null) {
            o.num("mono_ns", r.mono);
        }
        emit(o.toString());
    }

    // ------------------------------------------------------------------ protocol v2

    /** Writes a step report of cycle id: op f invoked (r null) or ended as r says. */
    void emitStep(long id, String f, Reply r) {
        Json.Obj o = new Json.Obj().num("id", id).str("step", r == null ? "invoke" : r.type).str("f", f)
                .num("mono_ns", System.nanoTime());
        if (r != null && r.error != null) {
            o.str("error", r.error);
        }
        if (r != null && r.type.equals("ok") && r.token != null) {
            o.num("token", r.token);
        }
        emit(o.toString());
    }

    /**
     * Runs a cycle request (v2). The lost events the listener sends (lostSeq) are
     * ordered with the step reports by the state lock: a lost event after an outcome
     * report and before the next invoke report ends the cycle, as the harness reads it.
     */
    void cycle(long id, Map<String, Object> req) throws ProtocolError {
        long depth = Math.max(reqLong(req, "depth", 1L), 1L);
        long holdNs = Math.max(reqLong(req, "hold_us", 0L), 0L) * 1000L;
        int held = 0;
        long seq = 0;
        while (held < depth) {
            emitStep(id, "acquire", null);
            Reply r = acquire(req);
            synchronized (state) {
                emitStep(id, "acquire", r);
                seq = lostSeq;
            }
            log.info("cycle {}: acquire -> {}{}", id, r.type, r.error != null ? " (" + r.error + ")" : "");
            if (r.type.equals("ok")) {
                held++;
                continue;
            }
            if (r.type.equals("info") || held == 0) {
                return;
            }
            break;
        }
        if (!holdUnlessLost(holdNs, seq)) {
            return;
        }
        for (; held > 0; held--) {
            synchronized (state) {
                if (lostSeq != seq) {
                    return;
                }
                emitStep(id, "release", null);
            }
            Reply r = release();
            synchronized (state) {
                emitStep(id, "release", r);
                seq = lostSeq;
            }
            log.info("cycle {}: release -> {}{}", id, r.type, r.error != null ? " (" + r.error + ")" : "");
            if (!r.type.equals("ok")) {
                return;
            }
        }
    }

    /** Holds for ns unless a lost event is sent (lostSeq moves past seq): false then. */
    boolean holdUnlessLost(long ns, long seq) {
        long end = System.nanoTime() + ns;
        synchronized (state) {
            while (lostSeq == seq) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return true;
                }
                if (left < 2_000_000L) {
                    break; // Object.wait sleeps whole milliseconds: park the rest
                }
                try {
                    state.wait(left / 1_000_000L - 1);
                } catch (InterruptedException ignored) {
                }
            }
            if (lostSeq != seq) {
                return false;
            }
        }
        for (long left; (left = end - System.nanoTime()) > 0; ) {
            java.util.concurrent.locks.LockSupport.parkNanos(left);
        }
        return true;
    }

    /** Sends a lost event; call with state held. */
    void loseAllLocked(String reason) {
        if (holds.isEmpty() || closing) {
            return;
        }
        for (Hold h : holds) {
            if (h.node != null) {
                addStaleLocked(h.node, h.session);
            }
        }
        holds.clear();
        dirty = true;
        lostSeq++;
        lostReason = reason;
        lastLoss = "lost: " + reason;
        log.warn("lost what was held: {}", reason);
        emit(new Json.Obj().str("event", "lost").str("error", reason).toString());
        state.notifyAll();
    }

    void addStaleLocked(String node, long session) {
        for (Stale s : stale) {
            if (s.node.equals(node)) {
                return;
            }
        }
        stale.add(new Stale(node, session));
    }

    /** Sends a session event if the current session is new. */
    void reportSession(boolean fromInit) {
        CuratorFramework c = client;
        if (c == null) {
            return;
        }
        long sid;
        byte[] passwd;
        try {
            ZooKeeper zk = c.getZookeeperClient().getZooKeeper();
            sid = zk.getSessionId();
            passwd = zk.getSessionPasswd();
        } catch (Exception e) {
            log.warn("reading the session id: {}", e.toString());
            return;
        }
        synchronized (state) {
            if (fromInit) {
                initialized = true;
            }
            if (!initialized || closing || sid == 0 || sid == reportedSession) {
                return;
            }
            if (!holds.isEmpty()) {
                for (Hold h : holds) {
                    if (h.session != sid) {
                        loseAllLocked("new session " + hexSession(sid) + " (was " + hexSession(h.session) + ")");
                        break;
                    }
                }
            }
            reportedSession = sid;
            Json.Obj o = new Json.Obj().str("event", "session").str("session_id", hexSession(sid));
            if (passwd != null && passwd.length > 0) {
                o.str("passwd", Base64.getEncoder().encodeToString(passwd));
            }
            log.info("session {}", hexSession(sid));
            emit(o.toString());
        }
    }

    static String hexSession(long sid) {
        return "0x" + Long.toHexString(sid);
    }

    // ------------------------------------------------------------------ init

    Reply init(long id, Map<String, Object> req) throws ProtocolError {
        String connect = reqString(req, "connect", "");
        long st = reqLong(req, "session_timeout_ms", 0L);
        String p = reqString(req, "path", "");
        String k = reqString(req, "kind", "");
        long pm = reqLong(req, "permits", 0L);
        long worker = reqLong(req, "worker", 0L);
        String cp = reqString(req, "counter_path", "");
        boolean fe = reqBool(req, "fenced", false);
        long wr = reqLong(req, "write_retry_ms", 0L);

        if (!Arrays.asList(RECIPES).contains(recipe)) {
            return Reply.fail("unknown recipe " + recipe + " (known: " + String.join(", ", RECIPES) + ")");
        }
        if (connect.trim().isEmpty()) {
            return Reply.fail("init: connect is empty");
        }
        if (st <= 0 || st > 600_000) {
            return Reply.fail("init: session_timeout_ms must be in 1..600000, got " + st);
        }
        if (!validPath(p)) {
            return Reply.fail("init: path must be an absolute znode path, got \"" + p + "\"");
        }
        if (k.isEmpty()) {
            return Reply.fail("init: kind is empty");
        }
        List<String> kinds;
        switch (recipe) {
            case "curator-mutex":
                kinds = List.of("mutex", "counter");
                break;
            case "curator-semaphore":
                kinds = List.of("semaphore");
                break;
            case "curator-rwlock":
                kinds = List.of("rwlock");
                break;
            default:
                kinds = List.of("reentrant", "mutex");
                break;
        }
        if (!kinds.contains(k)) {
            return Reply.fail(recipe + " does not support kind " + k + " (want " + String.join(" or ", kinds) + ")");
        }
        if (k.equals("semaphore")) {
            if (pm < 1 || pm > 1_000_000) {
                return Reply.fail("init: a semaphore needs permits >= 1, got " + pm);
            }
        } else if (pm > 1 || pm < 0) {
            return Reply.fail(recipe + ": kind " + k + " has one permit, got permits " + pm);
        }
        if (k.equals("counter")) {
            if (!validPath(cp)) {
                return Reply.fail("init: kind counter needs an absolute counter_path, got \"" + cp + "\"");
            }
        }

        CuratorFramework c;
        try {
            // connectionTimeoutMs: how long one Curator operation waits for a
            // connection before failing (or retrying). RetryUntilElapsed(session
            // timeout, 100 ms) bounds each operation's retries to one session timeout,
            // so an op against a dead ensemble fails in about 2x the session timeout.
            // No ensemble tracker: the harness's connect string is the truth.
            c = CuratorFrameworkFactory.builder()
                    .connectString(connect)
                    .sessionTimeoutMs((int) st)
                    .connectionTimeoutMs((int) st)
                    .retryPolicy(new RetryUntilElapsed((int) st, 100))
                    .ensembleTracker(false)
                    .build();
        } catch (Exception e) {
            return Reply.fail("init: building the Curator client: " + describe(e));
        }
        synchronized (state) {
            if (closing) {
                return Reply.info("shutting down");
            }
            starting = c;
        }
        c.getConnectionStateListenable().addListener(new ConnectionStateListener() {
            @Override
            public void stateChanged(CuratorFramework cf, ConnectionState s) {
                onState(cf, s);
            }
        });
        boolean connected;
        try {
            c.start();
            connected = c.blockUntilConnected((int) (2 * st), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            closeQuietly(c, 1500);
            return Reply.info("init interrupted");
        } catch (IllegalArgumentException e) {
            closeQuietly(c, 1500); // e.g. a connect string ZooKeeper cannot parse
            return Reply.fail("init: starting the Curator client: " + describe(e));
        } catch (Exception e) {
            closeQuietly(c, 1500);
            return Reply.info("init: starting the Curator client: " + describe(e));
        }
        if (!connected) {
            // Not a refusal of the configuration (the harness gives up on a recipe
            // whose init fails): the ensemble may just be unreachable for now.
            closeQuietly(c, 1500);
            return Reply.info("init: no session with " + connect + " within " + (2 * st) + " ms");
        }
        kind = k;
        path = p;
        permits = k.equals("semaphore") ? (int) pm : 1;
        counterPath = cp;
        fenced = fe;
        writeRetryMs = Math.max(0L, wr);
        sessionTimeoutMs = (int) st;
        workerNo = (int) worker;
        try {
            newRecipeObjects(c);
        } catch (Exception e) {
            closeQuietly(c, 1500);
            return Reply.fail("init: " + describe(e));
        }
        client = c;
        starting = null;
        log.info("worker {}: {} kind {} on {} (permits {}, fenced {}) via {}", workerNo, recipe, kind, path,
                permits, fenced, connect);
        return Reply.ok();
    }

    static boolean validPath(String p) {
        return p.startsWith("/") && p.length() >= 2 && !p.endsWith("/") && !p.contains("//");
    }

    void newRecipeObjects(CuratorFramework c) {
        switch (recipe) {
            case "curator-semaphore":
                semaphore = new InterProcessSemaphoreV2(c, path, permits);
                break;
            case "curator-rwlock":
                rwlock = new InterProcessReadWriteLock(c, path);
                break;
            default:
                mutex = new InterProcessMutex(c, path);
                break;
        }
    }

    // ------------------------------------------------------------------ events

    void onState(CuratorFramework cf, ConnectionState s) {
        log.info("connection state {}", s);
        if (cf != client) {
            return; // a client of a failed init, or not yet ready
        }
        switch (s) {
            case SUSPENDED:
            case LOST:
            case READ_ONLY:
                synchronized (state) {
                    epoch++;
                    state.notifyAll();
                    loseAllLocked("connection " + s.name().toLowerCase());
                }
                triggerJanitor();
                break;
            case CONNECTED:
            case RECONNECTED:
                reportSession(false);
                triggerJanitor();
                break;
            default:
                break;
        }
    }

    // ------------------------------------------------------------------ janitor

    void triggerJanitor() {
        synchronized (state) {
            if (stale.isEmpty()) {
                return;
            }
        }
        if (!janitorQueued.compareAndSet(false, true)) {
            return;
        }
        janitorThread.execute(() -> {
            janitorQueued.set(false);
            List<Stale> todo;
            synchronized (state) {
                if (closing) {
                    return;
                }
                todo = new ArrayList<>(stale);
            }
            for (Stale s : todo) {
                boolean done;
                try {
                    Stat st = client.checkExists().forPath(s.node);
                    if (st == null || st.getEphemeralOwner() != s.session) {
                        done = true;
                    } else {
                        client.delete().forPath(s.node);
                        log.info("deleted the lock node {} of a hold given up as lost", s.node);
                        done = true;
                    }
                } catch (KeeperException.NoNodeException e) {
                    done = true;
                } catch (Exception e) {
                    log.info("janitor: {} stays for later: {}", s.node, describe(e));
                    done = false;
                }
                if (done) {
                    synchronized (state) {
                        stale.remove(s);
                    }
                }
            }
        });
    }

    Set<String> staleNodes() {
        synchronized (state) {
            Set<String> out = new HashSet<>();
            for (Stale s : stale) {
                out.add(s.node);
            }
            return out;
        }
    }

    // ------------------------------------------------------------------ running ops

    interface Body {
        Reply run() throws Exception;
    }

    /**
     * Runs body on the lock thread and waits for it. If guard is set (the harness
     * believes we hold the lock while this op runs) and a lost event is sent meanwhile,
     * it answers info at once: the harness ignores lost events while an op is in
     * flight, and the op can no longer be trusted.
     */
    Reply runOp(String what, boolean guard, Body body) {
        long seq;
        synchronized (state) {
            seq = lostSeq;
        }
        FutureTask<Reply> f = new FutureTask<>(body::run) {
            @Override
            protected void done() {
                synchronized (state) {
                    state.notifyAll();
                }
            }
        };
        lockThread.execute(f);
        synchronized (state) {
            while (!f.isDone()) {
                if (guard && lostSeq != seq) {
                    return Reply.info("lock lost while " + what + " was in flight: " + lostReason);
                }
                try {
                    state.wait(1000);
                } catch (InterruptedException e) {
                    return Reply.info(what + " interrupted");
                }
            }
        }
        try {
            return f.get();
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable c = e.getCause();
            log.warn("{}: {}", what, c.toString(), c);
            return Reply.info(what + ": " + describe(c));
        } catch (InterruptedException e) {
            return Reply.info(what + " interrupted");
        }
    }

    static String describe(Throwable t) {
        String m = t.getMessage();
        String n = t.getClass().getSimpleName();
        return m == null || m.isEmpty() ? n : n + ": " + m;
    }

    long sessionId() throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionId();
    }

    // ------------------------------------------------------------------ acquire

    Reply acquire(Map<String, Object> req) throws ProtocolError {
        long timeoutMs = reqLong(req, "timeout_ms", 0L);
        String mode = reqString(req, "mode", "");
        if (timeoutMs < 0) {
            return Reply.fail("negative timeout_ms " + timeoutMs);
        }
        if (recipe.equals("curator-rwlock")) {
            if (!mode.equals("read") && !mode.equals("write")) {
                return Reply.fail("kind rwlock needs mode read or write, got \"" + mode + "\"");
            }
        } else if (!mode.isEmpty()) {
            return Reply.fail("kind " + kind + " has no modes, got mode \"" + mode + "\"");
        }
        boolean holding;
        synchronized (state) {
            holding = !holds.isEmpty();
        }
        if (holding && recipe.equals("curator-mutex")) {
            // InterProcessMutex would re-enter, which a mutex holder must not be
            // granted; curator-reentrant is the recipe for that.
            return Reply.fail("already held (curator-mutex does not re-enter; use curator-reentrant)");
        }
        triggerJanitor();
        return runOp("acquire", holding, () -> doAcquire(timeoutMs, mode));
    }

    Reply doAcquire(long timeoutMs, String mode) throws Exception {
        long epoch0;
        synchronized (state) {
            epoch0 = epoch;
            if (dirty && holds.isEmpty()) {
                newRecipeObjects(client);
                dirty = false;
            }
        }
        long sid0 = sessionId();
        Hold h;
        long epoch1; // just after the grant, before our node was looked up
        boolean fresh = true; // the node was looked up afresh (not a re-entered level)
        switch (recipe) {
            case "curator-semaphore": {
                Lease lease = timeoutMs > 0 ? semaphore.acquire(timeoutMs, TimeUnit.MILLISECONDS) : semaphore.acquire();
                if (lease == null) {
                    ghostLeases(sid0);
                    return Reply.fail("timeout");
                }
                epoch1 = epochNow();
                h = new Hold(null, null, lease, sid0);
                // getNodeName is the lease node's name; it lives under PATH/leases.
                String name = lease.getNodeName();
                h.node = name.startsWith("/") ? name : path + "/leases/" + name;
                try {
                    Stat st = client.checkExists().forPath(h.node);
                    if (st != null && st.getEphemeralOwner() == sid0) {
                        h.czxid = st.getCzxid();
                    }
                } catch (Exception e) {
                    log.warn("looking up the lease node {}: {}", h.node, describe(e));
                }
                break;
            }
            default: {
                InterProcessMutex m;
                String name;
                if (recipe.equals("curator-rwlock")) {
                    m = mode.equals("read") ? rwlock.readLock() : rwlock.writeLock();
                    name = mode.equals("read") ? "__READ__" : "__WRIT__";
                } else {
                    m = mutex;
                    name = "lock-";
                }
                Hold outer = null;
                synchronized (state) {
                    if (recipe.equals("curator-reentrant") && !holds.isEmpty()) {
                        outer = holds.get(holds.size() - 1);
                    }
                }
                boolean ok;
                if (timeoutMs > 0) {
                    ok = m.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                } else {
                    m.acquire();
                    ok = true;
                }
                if (!ok) {
                    // Curator deleted its node before returning false (a failed delete
                    // would have thrown instead).
                    return Reply.fail("timeout");
                }
                epoch1 = epochNow();
                h = new Hold(recipe.equals("curator-rwlock") ? mode : null, m, null, sid0);
                if (outer != null) {
                    h.node = outer.node;
                    h.czxid = outer.czxid;
                    fresh = false;
                } else {
                    try {
                        String[] found = findOwnNode(path, name, sid0);
                        if (found != null) {
                            h.node = found[0];
                            h.czxid = Long.parseLong(found[1]);
                        }
                    } catch (Exception e) {
                        log.warn("looking up our lock node under {}: {}", path, describe(e));
                    }
                }
                break;
            }
        }
        // Our node, found after the grant, is owned by the session the acquire ran in,
        // which is still the current one.
        boolean verified = fresh && h.czxid != 0 && currentSessionOr0() == sid0;
        Reply doubtful = null;
        synchronized (state) {
            // A SUSPENDED (or LOST) during the acquire makes Curator's grant doubtful,
            // unless our node was seen alive in the same session after the grant, with
            // no suspension since: nodes ahead of ours cannot come back, so a node that
            // outlived the suspension still holds what Curator granted.
            boolean calm = epoch == epoch0;
            boolean reverified = !calm && epoch == epoch1 && verified;
            if (reverified) {
                log.info("the connection was suspended during the acquire; {} outlived it in session {}", h.node,
                        hexSession(sid0));
            }
            if (closing || !(calm || reverified)) {
                // Whether the grant still stands is unknown. Give the node up and say so.
                if (h.node != null) {
                    addStaleLocked(h.node, h.session);
                }
                holds.clear();
                dirty = true;
                triggerJanitorLater();
                doubtful = Reply.info("connection suspended during acquire");
            } else {
                holds.add(h);
                lastLoss = "";
            }
        }
        if (doubtful != null) {
            if (h.node == null) {
                releaseUnfound(h);
            }
            return doubtful;
        }
        if (h.node == null) {
            log.warn("acquired, but our lock node under {} was not found (no token)", path);
        } else {
            log.info("holding {} (czxid {}, level {})", h.node, h.czxid, holdCount());
        }
        Reply r = Reply.ok();
        if (h.czxid != 0) {
            r.token = h.czxid;
        }
        return r;
    }

    /**
     * Gives up a doubtful grant whose node we could not find (the janitor cannot delete
     * what it does not know): Curator knows it, and its release deletes it, retrying in
     * the background (a guaranteed delete) until the session ends. Without this, a kept
     * session would keep the node as an orphan that blocks every waiter.
     */
    void releaseUnfound(Hold h) {
        try {
            if (h.lease != null) {
                h.lease.close();
            } else if (h.mutex != null) {
                h.mutex.release();
            }
            log.info("gave up a doubtful grant whose lock node was not found: Curator deletes it");
        } catch (Exception e) {
            log.warn("giving up a doubtful grant whose lock node was not found: {}", describe(e));
        }
    }

    long epochNow() {
        synchronized (state) {
            return epoch;
        }
    }

    long currentSessionOr0() {
        try {
            return sessionId();
        } catch (Exception e) {
            return 0;
        }
    }

    void triggerJanitorLater() {
        janitorThread.execute(this::triggerJanitor);
    }

    int holdCount() {
        synchronized (state) {
            return holds.size();
        }
    }

    /**
     * The newest child of parent whose name contains name and whose ephemeral owner is
     * session sid, leaving out nodes given up earlier: {path, czxid}, or null.
     */
    String[] findOwnNode(String parent, String name, long sid) throws Exception {
        Set<String> skip = staleNodes();
        List<String> children;
        try {
            children = client.getChildren().forPath(parent);
        } catch (KeeperException.NoNodeException e) {
            return null;
        }
        String best = null;
        long bestCzxid = 0;
        int n = 0;
        for (String c : children) {
            if (!c.contains(name)) {
                continue;
            }
            String p = parent + "/" + c;
            if (skip.contains(p)) {
                continue;
            }
            Stat st = client.checkExists().forPath(p);
            if (st == null || st.getEphemeralOwner() != sid) {
                continue;
            }
            n++;
            if (best == null || st.getCzxid() > bestCzxid) {
                best = p;
                bestCzxid = st.getCzxid();
            }
        }
        if (n > 1) {
            log.warn("session {} owns {} nodes under {}; taking the newest, {}", hexSession(sid), n, parent, best);
        }
        return best == null ? null : new String[] {best, Long.toString(bestCzxid)};
    }

    /**
     * After a semaphore acquire timed out: Curator deletes its lease node quietly
     * (returnAll swallows errors), so look for lease nodes of ours that are not held
     * and hand them to the janitor. A leftover only takes a permit from everyone; it
     * never lets anyone in, so the timeout stays a certain failure.
     */
    void ghostLeases(long sid) {
        try {
            String leases = path + "/leases";
            List<String> children;
            try {
                children = client.getChildren().forPath(leases);
            } catch (KeeperException.NoNodeException e) {
                return;
            }
            Set<String> held = new HashSet<>();
            synchronized (state) {
                for (Hold h : holds) {
                    if (h.node != null) {
                        held.add(h.node);
                    }
                }
            }
            for (String c : children) {
                String p = leases + "/" + c;
                if (held.contains(p)) {
                    continue;
                }
                Stat st = client.checkExists().forPath(p);
                if (st != null && st.getEphemeralOwner() == sid) {
                    log.warn("a timed-out semaphore acquire left its lease node {}; deleting it", p);
                    synchronized (state) {
                        addStaleLocked(p, sid);
                    }
                    triggerJanitorLater();
                }
            }
        } catch (Exception e) {
            log.warn("looking for leftover lease nodes: {}", describe(e));
        }
    }

    // ------------------------------------------------------------------ release

    Reply release() {
        Hold h;
        boolean rest;
        synchronized (state) {
            if (holds.isEmpty()) {
                return Reply.fail(lastLoss.isEmpty() ? "not held" : "not held (" + lastLoss + ")");
            }
            // Claim the hold: a lost event during the release is not sent for it (the
            // release's own outcome decides).
            h = holds.remove(holds.size() - 1);
            rest = !holds.isEmpty();
        }
        return runOp("release", rest, () -> doRelease(h));
    }

    Reply doRelease(Hold h) throws Exception {
        long sid = sessionId();
        String node = h.node;
        String gone = null;
        if (node == null) {
            String name = h.lease != null ? "lease-" : h.mode == null ? "lock-" : h.mode.equals("read") ? "__READ__" : "__WRIT__";
            String[] found = findOwnNode(h.lease != null ? path + "/leases" : path, name, h.session);
            if (found == null) {
                gone = "not held: our lock node is gone";
            } else {
                node = found[0];
            }
        }
        if (gone == null) {
            Stat st = client.checkExists().forPath(node);
            if (st == null) {
                gone = "not held: the lock node " + node + " was already gone";
            } else if (st.getEphemeralOwner() != sid) {
                gone = "not held: the lock node " + node + " belongs to session " + hexSession(st.getEphemeralOwner())
                        + ", not to the current session " + hexSession(sid);
            }
        }
        if (gone != null) {
            giveUpAll(node, h.session);
            return Reply.fail(gone);
        }
        try {
            if (h.lease != null) {
                // Not semaphore.returnLease, which swallows errors: Lease.close deletes
                // the lease node and throws on anything but NoNode.
                h.lease.close();
            } else {
                h.mutex.release();
            }
        } catch (IllegalMonitorStateException e) {
            giveUpAll(node, h.session);
            return Reply.fail("not held: " + describe(e));
        } catch (Exception e) {
            giveUpAll(node, h.session);
            return Reply.info("release: " + describe(e));
        }
        return Reply.ok();
    }

    /** Forgets every hold after a release found the lock gone. */
    void giveUpAll(String node, long session) {
        synchronized (state) {
            if (node != null) {
                addStaleLocked(node, session);
            }
            for (Hold o : holds) {
                if (o.node != null) {
                    addStaleLocked(o.node, o.session);
                }
            }
            holds.clear();
            dirty = true;
            lastLoss = "the lock node was gone at release";
        }
        triggerJanitorLater();
    }

    // ------------------------------------------------------------------ counter

    Reply counterCheck(String op) {
        if (!kind.equals("counter")) {
            return Reply.fail(op + " needs kind counter (this worker runs kind " + kind + ")");
        }
        synchronized (state) {
            if (holds.isEmpty()) {
                return Reply.fail("not held: " + op + " is only allowed while holding the lock");
            }
        }
        return null;
    }

    Reply counterRead() {
        Reply pre = counterCheck("read");
        if (pre != null) {
            return pre;
        }
        return runOp("read", true, () -> {
            ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
            byte[] data;
            try {
                data = zk.getData(counterPath, false, null);
            } catch (KeeperException.NoNodeException e) {
                data = null;
            } catch (KeeperException e) {
                return Reply.info("read " + counterPath + ": " + describe(e));
            }
            String s = data == null ? "" : new String(data, StandardCharsets.UTF_8).trim();
            long v;
            if (s.isEmpty()) {
                v = 0;
            } else {
                try {
                    v = Long.parseLong(s);
                } catch (NumberFormatException e) {
                    return Reply.fail("counter " + counterPath + " holds \"" + abbreviate(s) + "\", not a decimal integer");
                }
            }
            Reply r = Reply.ok();
            r.value = v;
            return r;
        });
    }

    Reply counterWrite(long value) {
        Reply pre = counterCheck("write");
        if (pre != null) {
            return pre;
        }
        Hold top;
        synchronized (state) {
            top = holds.get(holds.size() - 1);
        }
        // Like an application's retry loop (Curator's RetryLoop, Kazoo's KazooRetry):
        // a write whose outcome is unknown is tried again until write_retry_ms is up.
        long deadline = System.nanoTime() + writeRetryMs * 1_000_000L;
        for (int attempt = 0; ; attempt++) {
            Reply r = runOp("write", true, () -> doWrite(top, value));
            if (r.type.equals("fail") && attempt > 0) {
                // An earlier attempt may have been applied: the outcome stays unknown.
                return Reply.info(r.error + " (after " + attempt + " attempts whose outcome is unknown)");
            }
            if (!r.type.equals("info") || System.nanoTime() + 100_000_000L >= deadline) {
                return r;
            }
            log.info("write {}: {}: retrying", value, r.error);
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return r;
            }
        }
    }

    /** Codes after which a ZooKeeper write certainly did not happen. */
    static boolean definite(KeeperException.Code c) {
        switch (c) {
            case NONODE:
            case NODEEXISTS:
            case BADVERSION:
            case NOTEMPTY:
            case NOAUTH:
            case BADARGUMENTS:
            case INVALIDACL:
            case NOCHILDRENFOREPHEMERALS:
                return true;
            default:
                return false;
        }
    }

    /**
     * Writes the counter through the session's own ZooKeeper handle, not through
     * Curator's retrying builders: a write whose reply is lost must come back as
     * connection loss (info), not be retried into a different answer. Fenced: one
     * multi of check(our lock node) + setData (create if the counter is missing).
     */
    Reply doWrite(Hold top, long value) throws Exception {
        byte[] data = Long.toString(value).getBytes(StandardCharsets.UTF_8);
        String node = top.node;
        if (fenced && node == null) {
            String[] found = findOwnNode(path, "lock-", top.session);
            if (found == null) {
                return Reply.fail("fenced: lock node gone");
            }
            node = found[0];
            top.node = node;
        }
        ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
        boolean create = false;
        for (int tries = 0; tries < 6; tries++) {
            try {
                if (fenced) {
                    Op set = create
                            ? Op.create(counterPath, data, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)
                            : Op.setData(counterPath, data, -1);
                    zk.multi(List.of(Op.check(node, -1), set));
                } else if (create) {
                    zk.create(counterPath, data, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                } else {
                    zk.setData(counterPath, data, -1);
                }
                return Reply.ok();
            } catch (KeeperException e) {
                KeeperException.Code code = e.code();
                if (!definite(code)) {
                    return Reply.info("write " + counterPath + ": " + describe(e));
                }
                // A failed multi applied nothing. Which op failed decides what next.
                int failed = fenced ? failedOp(e) : 1;
                if (failed == 0 && code == KeeperException.Code.NONODE) {
                    return Reply.fail("fenced: lock node gone");
                }
                if (failed != 1) {
                    return Reply.fail("write " + counterPath + " (fenced by " + node + "): " + describe(e));
                }
                if (!create && code == KeeperException.Code.NONODE) {
                    create = true; // the counter does not exist yet
                    continue;
                }
                if (create && code == KeeperException.Code.NODEEXISTS) {
                    create = false; // someone created it meanwhile
                    continue;
                }
                if (create && code == KeeperException.Code.NONODE) {
                    mkdirs(zk, parentOf(counterPath)); // its parent is missing
                    continue;
                }
                return Reply.fail("write " + counterPath + ": " + describe(e));
            }
        }
        return Reply.fail("write " + counterPath + ": gave up, the counter kept appearing and disappearing");
    }

    /** The index of the op that made a multi fail, or -1. */
    static int failedOp(KeeperException e) {
        List<OpResult> rs = e.getResults();
        if (rs == null) {
            return -1;
        }
        for (int i = 0; i < rs.size(); i++) {
            if (rs.get(i) instanceof OpResult.ErrorResult) {
                int err = ((OpResult.ErrorResult) rs.get(i)).getErr();
                if (err != KeeperException.Code.OK.intValue()
                        && err != KeeperException.Code.RUNTIMEINCONSISTENCY.intValue()) {
                    return i;
                }
            }
        }
        return -1;
    }

    static String parentOf(String p) {
        int i = p.lastIndexOf('/');
        return i <= 0 ? "/" : p.substring(0, i);
    }

    static void mkdirs(ZooKeeper zk, String p) throws Exception {
        if (p.equals("/")) {
            return;
        }
        if (zk.exists(p, false) != null) {
            return;
        }
        mkdirs(zk, parentOf(p));
        try {
            zk.create(p, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException ignored) {
        }
    }

    // ------------------------------------------------------------------ request fields

    static long reqLong(Map<String, Object> m, String k, Long dflt) throws ProtocolError {
        Object v = m.get(k);
        if (v == null || v == Json.NULL) {
            if (dflt == null) {
                throw new ProtocolError("field " + k + ": missing");
            }
            return dflt;
        }
        if (!(v instanceof Long)) {
            throw new ProtocolError("field " + k + ": want an integer, got " + Json.typeName(v));
        }
        return (Long) v;
    }

    static Long optLong(Map<String, Object> m, String k) throws ProtocolError {
        Object v = m.get(k);
        if (v == null || v == Json.NULL) {
            return null;
        }
        return reqLong(m, k, null);
    }

    static String reqString(Map<String, Object> m, String k, String dflt) throws ProtocolError {
        Object v = m.get(k);
        if (v == null || v == Json.NULL) {
            return dflt;
        }
        if (!(v instanceof String)) {
            throw new ProtocolError("field " + k + ": want a string, got " + Json.typeName(v));
        }
        return (String) v;
    }

    static boolean reqBool(Map<String, Object> m, String k, boolean dflt) throws ProtocolError {
        Object v = m.get(k);
        if (v == null || v == Json.NULL) {
            return dflt;
        }
        if (!(v instanceof Boolean)) {
            throw new ProtocolError("field " + k + ": want a boolean, got " + Json.typeName(v));
        }
        return (Boolean) v;
    }

    // ------------------------------------------------------------------ JSON

    /**
     * A small JSON reader and writer: objects become LinkedHashMap, arrays ArrayList,
     * integers Long, other numbers Double, null Json.NULL. Parse errors throw
     * IllegalArgumentException.
     */
    static final class Json {
        static final Object NULL = new Object() {
            @Override
            public String toString() {
                return "null";
            }
        };

        private final String s;
        private int i;
        private int depth;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String s) {
            Json p = new Json(s);
            p.ws();
            Object v = p.value();
            p.ws();
            if (p.i != s.length()) {
                throw p.err("trailing data");
            }
            return v;
        }

        static String typeName(Object v) {
            if (v instanceof String) {
                return "a string";
            }
            if (v instanceof Long || v instanceof Double) {
                return "a number";
            }
            if (v instanceof Boolean) {
                return "a boolean";
            }
            if (v instanceof Map) {
                return "an object";
            }
            if (v instanceof List) {
                return "an array";
            }
            return "null";
        }

        private IllegalArgumentException err(String msg) {
            return new IllegalArgumentException(msg + " at offset " + i);
        }

        private void ws() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                    i++;
                } else {
                    break;
                }
            }
        }

        private Object value() {
            if (i >= s.length()) {
                throw err("unexpected end");
            }
            char c = s.charAt(i);
            switch (c) {
                case '{':
                    return object();
                case '[':
                    return array();
                case '"':
                    return string();
                case 't':
                    return literal("true", Boolean.TRUE);
                case 'f':
                    return literal("false", Boolean.FALSE);
                case 'n':
                    return literal("null", NULL);
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        return number();
                    }
                    throw err("unexpected character '" + c + "'");
            }
        }

        private Object literal(String word, Object v) {
            if (!s.startsWith(word, i)) {
                throw err("bad literal");
            }
            i += word.length();
            return v;
        }

        private Map<String, Object> object() {
            if (++depth > 64) {
                throw err("nested too deep");
            }
            i++; // {
            Map<String, Object> m = new LinkedHashMap<>();
            ws();
            if (i < s.length() && s.charAt(i) == '}') {
                i++;
                depth--;
                return m;
            }
            while (true) {
                ws();
                if (i >= s.length() || s.charAt(i) != '"') {
                    throw err("want a string key");
                }
                String k = string();
                ws();
                if (i >= s.length() || s.charAt(i) != ':') {
                    throw err("want ':'");
                }
                i++;
                ws();
                m.put(k, value());
                ws();
                if (i >= s.length()) {
                    throw err("unexpected end in object");
                }
                char c = s.charAt(i++);
                if (c == '}') {
                    depth--;
                    return m;
                }
                if (c != ',') {
                    throw err("want ',' or '}'");
                }
            }
        }

        private List<Object> array() {
            if (++depth > 64) {
                throw err("nested too deep");
            }
            i++; // [
            List<Object> l = new ArrayList<>();
            ws();
            if (i < s.length() && s.charAt(i) == ']') {
                i++;
                depth--;
                return l;
            }
            while (true) {
                ws();
                l.add(value());
                ws();
                if (i >= s.length()) {
                    throw err("unexpected end in array");
                }
                char c = s.charAt(i++);
                if (c == ']') {
                    depth--;
                    return l;
                }
                if (c != ',') {
                    throw err("want ',' or ']'");
                }
            }
        }

        private String string() {
            i++; // "
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw err("unterminated string");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c < 0x20) {
                    throw err("control character in string");
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (i >= s.length()) {
                    throw err("unterminated escape");
                }
                char e = s.charAt(i++);
                switch (e) {
                    case '"':
                    case '\\':
                    case '/':
                        b.append(e);
                        break;
                    case 'b':
                        b.append('\b');
                        break;
                    case 'f':
                        b.append('\f');
                        break;
                    case 'n':
                        b.append('\n');
                        break;
                    case 'r':
                        b.append('\r');
                        break;
                    case 't':
                        b.append('\t');
                        break;
                    case 'u':
                        if (i + 4 > s.length()) {
                            throw err("short \\u escape");
                        }
                        try {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        } catch (NumberFormatException x) {
                            throw err("bad \\u escape");
                        }
                        i += 4;
                        break;
                    default:
                        throw err("bad escape \\" + e);
                }
            }
        }

        private Object number() {
            int start = i;
            if (s.charAt(i) == '-') {
                i++;
            }
            if (i >= s.length() || !Character.isDigit(s.charAt(i))) {
                throw err("bad number");
            }
            if (s.charAt(i) == '0' && i + 1 < s.length() && Character.isDigit(s.charAt(i + 1))) {
                throw err("leading zero");
            }
            while (i < s.length() && isDigit(s.charAt(i))) {
                i++;
            }
            boolean integral = true;
            if (i < s.length() && s.charAt(i) == '.') {
                integral = false;
                i++;
                int d = i;
                while (i < s.length() && isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == d) {
                    throw err("bad fraction");
                }
            }
            if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                integral = false;
                i++;
                if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                    i++;
                }
                int d = i;
                while (i < s.length() && isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == d) {
                    throw err("bad exponent");
                }
            }
            String t = s.substring(start, i);
            if (integral) {
                try {
                    return Long.parseLong(t);
                } catch (NumberFormatException e) {
                    return Double.parseDouble(t); // out of int64 range: not an integer field
                }
            }
            return Double.parseDouble(t);
        }

        private static boolean isDigit(char c) {
            return c >= '0' && c <= '9';
        }

        static String quote(String v) {
            StringBuilder b = new StringBuilder(v.length() + 2);
            b.append('"');
            for (int k = 0; k < v.length(); k++) {
                char c = v.charAt(k);
                switch (c) {
                    case '"':
                        b.append("\\\"");
                        break;
                    case '\\':
                        b.append("\\\\");
                        break;
                    case '\n':
                        b.append("\\n");
                        break;
                    case '\r':
                        b.append("\\r");
                        break;
                    case '\t':
                        b.append("\\t");
                        break;
                    default:
                        if (c < 0x20 || c == 0x2028 || c == 0x2029) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                }
            }
            return b.append('"').toString();
        }

        /** A flat JSON object writer, fields in insertion order. */
        static final class Obj {
            private final StringBuilder b = new StringBuilder("{");

            private Obj key(String k) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(quote(k)).append(':');
                return this;
            }

            Obj str(String k, String v) {
                key(k).b.append(quote(v));
                return this;
            }

            Obj num(String k, long v) {
                key(k).b.append(v);
                return this;
            }

            @Override
            public String toString() {
                return b + "}";
            }
        }
    }
}
