// ZlcWorker: the worker protocol (v2 and v1, docs/protocol.md) for the JVM workers of recipes/jvm,
// one implementation every such worker shares: a worker is a main class that hands
// serve() a Recipe (its library behind four calls) and ZlcWorker does the rest. The
// workers: ZlcCuratorWorker (Curator, Debian's and Maven Central's), ZlcRedissonWorker,
// ZlcSpringWorker.
//
// stdin carries the harness's requests, stdout only protocol lines (replies and
// events, one JSON object a line), stderr every log line (slf4j-simple, as each
// library logs). Requests are answered one at a time, in order, on the main thread,
// which is also the only thread that calls the Recipe (locks owned by a thread, as
// Redisson's are, are then always the same thread's).
//
//   init     Recipe.init with the request's fields: ok, or fail when the recipe refuses
//            the configuration (Refused: a kind it does not speak, fencing it cannot
//            do), or info (any other error: the servers may be unreachable for now).
//            After a fail or info, init may be sent again; after an ok it may not.
//            The harness's offer of protocol 2 or 3 is answered "protocol":2 on an
//            ok: the harness then speaks v2 (clock and cycle below, and v1's requests).
//            Events the recipe reports during init (its first session) are written
//            after init's ok, and dropped when init did not succeed.
//   acquire  Recipe.acquire(timeout_ms, mode): ok (with the token and the lock's place
//            when the recipe gives them), fail "timeout" when it returned null, fail
//            when it refused (Refused: an acquire it cannot make, certainly without
//            effect), info on any other error.
//   release  Recipe.release: ok; fail "not held: ..." when the recipe says it held
//            nothing (NotHeld: a lease that ran out before the release, a lock node
//            gone); info on any other error.
//   read     Counter.read (the counter workload, while holding): ok with the value;
//            fail "fenced: ..." when the fenced read was refused (Fenced); info on
//            any other error.
//   write    Counter.write(value): ok; fail "fenced: ..." when the fenced write
//            committed nothing (Fenced), fail when it was refused (Refused); any other
//            error is retried for init's write_retry_ms, 100 ms apart (the write's
//            outcome is unknown, and writing the same value again is harmless), then
//            answers info. A fail after such a retry answers info too: an earlier
//            attempt may have been applied.
//   clock    (v2) ok with mono_ns, System.nanoTime().
//   cycle    (v2) acquire depth times (as acquire), hold hold_us, release as often as
//            acquired, reporting each step on the cycle's id as it happens (an invoke
//            report written before the call, an outcome report after it, each
//            stamped mono_ns), then the reply ok. It ends early after the first
//            acquire's fail, any info, or a failed release; a nested acquire that
//            fails ends the acquiring (the levels held are held and released); a lost
//            event while holding with nothing in flight ends it with no release.
//   close    Recipe.close (bounded to 1.5 s), then ok and exit 0. EOF on stdin does the
//            same without a reply; a request still running 200 ms after EOF is
//            abandoned (as the Go workers cancel it: nobody is left to read its reply).
// In every request, NotHeld answers fail "not held: ...", Refused fail with its
// message, Unknown info with its message (an outcome the recipe cannot know), and any
// other exception info.
// A line that is not a JSON object, an unknown op, an op before an init that succeeded
// or an init after one: exit 1 without a reply (the harness never sends one;
// conformance's bad-request rule).
//
// Events: a Recipe reports "lost" (Events.lost) when its library tells it the lock is
// gone, and "session" (Events.session) when it has a new server-side session, from any
// thread; ZlcWorker writes each at once, or, while a request other than a cycle runs,
// right after its reply (the harness ignores an event while a request is in flight
// and reads it as the hold's end otherwise). Lost events
// and a cycle's step reports are written under one lock (state), so that the order
// the harness reads is the order in which the worker decided.

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class ZlcWorker {

    /** A lock library behind the protocol: one per worker process. */
    public interface Recipe {
        /** Connects as init says; throws Refused when the configuration is not one it runs. */
        void init(Init init, Events events) throws Exception;

        /**
         * Acquires within timeoutMs (0: no limit) in mode (the rwlock kind's "read" or
         * "write", else null): what it took, or null when the time ran out.
         */
        Acquired acquire(long timeoutMs, String mode) throws Exception;

        /** Releases the innermost hold; throws NotHeld when there was none any more. */
        void release() throws Exception;

        /** Ends the client and its connections; called once, at close or EOF. */
        void close() throws Exception;
    }

    /**
     * The counter workload's resource, kept by a Recipe that speaks the counter kind:
     * called only while it holds the lock.
     */
    public interface Counter {
        /** The counter's value (0 when it was never written). */
        long read() throws Exception;

        /** Sets the counter to value; throws Fenced when the fenced write committed nothing. */
        void write(long value) throws Exception;
    }

    /** What init says: the fields every service's init has (docs/protocol.md). */
    public static final class Init {
        /** The servers' addresses, host:port,... (Redis: the first is the primary). */
        public final List<String> connect;
        /** The session timeout: on Redis, the lock's TTL. */
        public final long sessionTimeoutMs;
        /** The lock's name. */
        public final String path;
        /** The workload kind (mutex, reentrant, ...) and its permits. */
        public final String kind;
        public final long permits;
        /** fenced: the counter workload writes only while its lock holds. */
        public final boolean fenced;
        /** The counter workload's counter (a key, a node), or null. */
        public final String counterPath;
        /** How long a write of unknown outcome is retried (the counter workload). */
        public final long writeRetryMs;
        /** The worker's number in the run (for its log lines). */
        public final long worker;
        /**
         * Redis's sentinel topology: the name the sentinels know the primary by, connect
         * then naming the sentinels; null on any other.
         */
        public final String sentinelMaster;
        /**
         * Redis's cluster topology: connect names a Redis Cluster's instances. No recipe
         * here follows a cluster's slots yet: init refuses it.
         */
        public final boolean redisCluster;

        Init(Map<String, Object> req) throws ProtocolError {
            connect = List.of(str(req, "connect").split(","));
            sessionTimeoutMs = num(req, "session_timeout_ms");
            path = str(req, "path");
            kind = str(req, "kind");
            permits = req.containsKey("permits") ? num(req, "permits") : 1;
            fenced = Boolean.TRUE.equals(req.get("fenced"));
            counterPath = req.containsKey("counter_path") ? str(req, "counter_path") : null;
            writeRetryMs = req.containsKey("write_retry_ms") ? num(req, "write_retry_ms") : 8000;
            worker = optNum(req, "worker", 0);
            sentinelMaster = req.containsKey("sentinel_master") ? str(req, "sentinel_master") : null;
            redisCluster = Boolean.TRUE.equals(req.get("redis_cluster"));
        }
    }

    /** An acquire's outcome: its fencing token and where the lock lives, each optional. */
    public static final class Acquired {
        final Long token;
        final Map<String, Object> lock;

        /** token may be null; lock is the "lock" object of docs/protocol.md, or null. */
        public Acquired(Long token, Map<String, Object> lock) {
            this.token = token;
            this.lock = lock;
        }
    }

    /** What a recipe tells the worker while it runs. */
    public interface Events {
        /** The lock is gone (the library said so): one "lost" event. */
        void lost(String why);

        /**
         * A new server-side session (docs/protocol.md: a ZooKeeper session's hex id
         * "0x..." and its password in base64, which may be null): one "session" event.
         */
        void session(String id, String passwd);
    }

    /**
     * A request refused, certainly without effect: it answers fail with why (init: a
     * configuration the recipe does not run; acquire: one it cannot make).
     */
    public static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        public Refused(String why) {
            super(why);
        }
    }

    /** A request whose outcome the recipe cannot know: it answers info with why. */
    public static final class Unknown extends Exception {
        private static final long serialVersionUID = 1L;

        public Unknown(String why) {
            super(why);
        }
    }

    /** A fenced read or write was refused: it answers fail "fenced: ...". */
    public static final class Fenced extends Exception {
        private static final long serialVersionUID = 1L;

        public Fenced(String why) {
            super(why);
        }
    }

    /** Nothing was held (a lease ran out, a lock node gone): the request answers fail "not held: why". */
    public static final class NotHeld extends Exception {
        private static final long serialVersionUID = 1L;

        public NotHeld(String why) {
            super(why);
        }
    }

    /** A request line out of the protocol: the worker exits 1 without a reply. */
    static final class ProtocolError extends Exception {
        private static final long serialVersionUID = 1L;

        ProtocolError(String why) {
            super(why);
        }
    }

    static final String EOF = new String("EOF");

    final Recipe recipe;
    final PrintStream proto;
    final Logger log;
    final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    final Object shutdownLock = new Object();
    volatile boolean busy;
    /** An init has been tried (close then closes the recipe); initialized: one succeeded. */
    volatile boolean initTried;
    boolean initialized;
    /** The events reported while init runs, written after its ok; null otherwise (under proto). */
    java.util.List<String> deferred;
    long writeRetryMs;
    /** The protocol version init agreed: 2 when the harness offered 2 or more. */
    long protocol = 1;
    /** Orders lost events with cycle step reports; lostSeq counts the lost events. */
    final Object state = new Object();
    long lostSeq;

    private ZlcWorker(Recipe recipe, PrintStream proto, Logger log) {
        this.recipe = recipe;
        this.proto = proto;
        this.log = log;
    }

    /**
     * Sets up logging and stdout as the protocol needs them and serves recipe on
     * stdin/stdout until close or EOF; never returns. Call it first thing in main.
     */
    public static void serve(java.util.function.Supplier<Recipe> recipe) {
        // Before anything creates a logger: slf4j-simple writes to stderr only. Each
        // setting can be overridden with -D on the command line.
        setIfAbsent("org.slf4j.simpleLogger.logFile", "System.err");
        setIfAbsent("org.slf4j.simpleLogger.defaultLogLevel", "info");
        setIfAbsent("org.slf4j.simpleLogger.showDateTime", "true");
        setIfAbsent("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        setIfAbsent("org.slf4j.simpleLogger.showShortLogName", "true");
        // stdout belongs to the protocol: keep our own handle on fd 1 and point
        // System.out at stderr, so a stray println from any library cannot corrupt it.
        PrintStream proto = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Logger log = LoggerFactory.getLogger("zlc.worker");
        new ZlcWorker(recipe.get(), proto, log).run();
    }

    /** Logs the usage line and exits 2 (main's bad arguments). */
    public static void usage(String line) {
        System.err.println(line);
        System.err.flush();
        Runtime.getRuntime().halt(2);
    }

    static void setIfAbsent(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    void run() {
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
        // The main thread answers the requests read before EOF, then closes; one still
        // running 200 ms after EOF is abandoned: nobody is left to read its reply.
        for (int ticks = 0; ; ) {
            try {
                Thread.sleep(50);
            } catch (InterruptedException ignored) {
            }
            String head = lines.peek();
            if (head == null) {
                return; // the main thread took EOF
            }
            if (head != EOF || !busy) {
                ticks = 0;
            } else if (++ticks >= 4) {
                log.info("stdin closed while a request runs; closing");
                shutdown(0, null);
            }
        }
    }

    void handle(String line) throws ProtocolError {
        Map<String, Object> req = Json.parse(line);
        long id = num(req, "id");
        String op = str(req, "op");
        if (!initialized && !op.equals("init") && !op.equals("close")) {
            throw new ProtocolError(op + " before an init that succeeded");
        }
        long t0 = System.nanoTime();
        switch (op) {
            case "init":
                if (initialized) {
                    throw new ProtocolError("init after an init that succeeded");
                }
                init(id, req);
                return;
            case "acquire":
                long timeout = num(req, "timeout_ms");
                String mode = req.containsKey("mode") ? str(req, "mode") : null;
                request(id, op + (mode != null ? " " + mode : ""), t0, () -> acquire(timeout, mode));
                return;
            case "clock":
            case "cycle":
                if (protocol < 2) {
                    throw new ProtocolError(op + " is protocol v2, and init agreed v1");
                }
                if (op.equals("clock")) {
                    Map<String, Object> r = ok();
                    r.put("mono_ns", System.nanoTime());
                    reply(id, r);
                } else {
                    String cmode = req.containsKey("mode") ? str(req, "mode") : null;
                    cycle(id, num(req, "timeout_ms"), cmode, optNum(req, "hold_us", 0), Math.max(optNum(req, "depth", 1), 1));
                    reply(id, ok());
                }
                return;
            case "release":
                request(id, op, t0, () -> {
                    recipe.release();
                    return ok();
                });
                return;
            case "read":
                Counter rc = counter(op);
                request(id, op, t0, () -> {
                    Map<String, Object> r = ok();
                    r.put("value", rc.read());
                    return r;
                });
                return;
            case "write":
                Counter wc = counter(op);
                long value = num(req, "value");
                request(id, op + " " + value, t0, () -> {
                    writeRetrying(wc, value);
                    return ok();
                });
                return;
            case "close":
                shutdown(0, id);
                return;
            default:
                throw new ProtocolError("unknown op " + op);
        }
    }

    /**
     * Runs init: the recipe's events meanwhile are held back, written after an ok
     * reply (the harness reads a session as the init's), dropped otherwise.
     */
    void init(long id, Map<String, Object> req) throws ProtocolError {
        Init init = new Init(req);
        writeRetryMs = init.writeRetryMs;
        boolean offered = req.get("protocol") instanceof Long v && v >= 2;
        synchronized (proto) {
            deferred = new java.util.ArrayList<>();
        }
        initTried = true;
        long t0 = System.nanoTime();
        Map<String, Object> r = call(() -> {
            if (init.redisCluster) {
                throw new Refused("init: redis_cluster: the JVM workers have no Redis Cluster mode yet (docs/redis.md)");
            }
            recipe.init(init, events);
            Map<String, Object> ok = ok();
            if (offered) {
                ok.put("protocol", 2L);
            }
            return ok;
        });
        boolean succeeded = r.get("type").equals("ok");
        if (succeeded) {
            initialized = true;
            protocol = offered ? 2 : 1;
        }
        log.info("request {}: init -> {}{} (protocol v{}, {} ms)", id, r.get("type"),
                r.containsKey("error") ? " (" + r.get("error") + ")" : "", protocol, (System.nanoTime() - t0) / 1_000_000);
        synchronized (proto) {
            reply(id, r);
            java.util.List<String> held = deferred;
            deferred = null;
            if (succeeded) {
                held.forEach(this::emit);
            }
        }
    }

    /**
     * Runs a plain request (not init or cycle) and writes its reply; events the recipe
     * reports meanwhile (a lease that ran out as its acquire returned) are written right
     * after the reply, where the harness reads them (it ignores an event while a
     * request is in flight, and reads one after an acquire's ok as that hold's end).
     */
    void request(long id, String what, long t0, Body body) {
        synchronized (proto) {
            deferred = new java.util.ArrayList<>();
        }
        Map<String, Object> r = call(body);
        logged(id, what, t0, r);
        java.util.List<String> held;
        synchronized (proto) {
            held = deferred;
            deferred = null;
        }
        held.forEach(this::emit);
    }

    /** Logs request id's outcome (what it was, and how long it took) and writes it. */
    void logged(long id, String what, long t0, Map<String, Object> r) {
        log.info("request {}: {} -> {}{}{} ({} ms)", id, what, r.get("type"),
                r.containsKey("error") ? " (" + r.get("error") + ")" : "",
                r.containsKey("token") ? " token " + r.get("token") : r.containsKey("value") ? " value " + r.get("value") : "",
                (System.nanoTime() - t0) / 1_000_000);
        reply(id, r);
    }

    /** Recipe.acquire as a reply: ok with its token and place, or fail "timeout". */
    Map<String, Object> acquire(long timeoutMs, String mode) throws Exception {
        Acquired a = recipe.acquire(timeoutMs, mode);
        if (a == null) {
            return fail("timeout");
        }
        Map<String, Object> r = ok();
        if (a.token != null) {
            r.put("token", a.token);
        }
        if (a.lock != null) {
            r.put("lock", a.lock);
        }
        return r;
    }

    /** Runs a cycle request (v2): see the header. */
    void cycle(long id, long timeoutMs, String mode, long holdUs, long depth) {
        long held = 0;
        long seq;
        while (true) {
            step(id, "acquire", null);
            Map<String, Object> r = call(() -> acquire(timeoutMs, mode));
            synchronized (state) {
                step(id, "acquire", r);
                seq = lostSeq;
            }
            if (r.get("type").equals("ok")) {
                if (++held < depth) {
                    continue;
                }
                break;
            }
            if (r.get("type").equals("info") || held == 0) {
                return;
            }
            break; // a nested acquire failed: hold and release the levels held
        }
        if (!holdUnlessLost(Math.max(holdUs, 0) * 1000L, seq)) {
            return;
        }
        for (; held > 0; held--) {
            synchronized (state) {
                if (lostSeq != seq) {
                    return;
                }
                step(id, "release", null);
            }
            Map<String, Object> r = call(() -> {
                recipe.release();
                return ok();
            });
            synchronized (state) {
                step(id, "release", r);
                seq = lostSeq;
            }
            if (!r.get("type").equals("ok")) {
                return;
            }
        }
    }

    /** Writes a step report of cycle id: op f invoked (outcome null) or ended as outcome says. */
    void step(long id, String f, Map<String, Object> outcome) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("id", id);
        line.put("step", outcome == null ? "invoke" : outcome.get("type"));
        line.put("f", f);
        line.put("mono_ns", System.nanoTime());
        if (outcome != null) {
            for (Map.Entry<String, Object> e : outcome.entrySet()) {
                if (!e.getKey().equals("type")) {
                    line.put(e.getKey(), e.getValue());
                }
            }
        }
        emit(Json.write(line));
    }

    /** Holds for ns unless a lost event is written (lostSeq moves past seq): false then. */
    boolean holdUnlessLost(long ns, long seq) {
        long end = System.nanoTime() + ns;
        synchronized (state) {
            for (long left; lostSeq == seq && (left = end - System.nanoTime()) >= 2_000_000L; ) {
                try {
                    state.wait(left / 1_000_000L - 1); // whole milliseconds: park the rest below
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

    /** The recipe's counter: a read or write to a recipe with none is out of the protocol. */
    Counter counter(String op) throws ProtocolError {
        if (!(recipe instanceof Counter)) {
            throw new ProtocolError(op + ": the recipe has no counter workload");
        }
        return (Counter) recipe;
    }

    /**
     * Writes value, again every 100 ms while its outcome is unknown (any error but a
     * refusal), for writeRetryMs. A refusal after such a retry is Unknown: an earlier
     * attempt may have been applied.
     */
    void writeRetrying(Counter c, long value) throws Exception {
        long end = System.nanoTime() + writeRetryMs * 1_000_000L;
        for (int attempt = 0; ; attempt++) {
            try {
                c.write(value);
                return;
            } catch (Fenced | Refused | NotHeld e) {
                if (attempt == 0) {
                    throw e;
                }
                String what = e instanceof Fenced ? "fenced: " + e.getMessage()
                        : e instanceof NotHeld ? "not held: " + e.getMessage() : e.getMessage();
                throw new Unknown(what + " (after " + attempt + " attempts whose outcome is unknown)");
            } catch (Exception e) {
                if (System.nanoTime() + 100_000_000L >= end) {
                    throw e;
                }
                log.info("write of unknown outcome, again in 100 ms: {}", e.toString());
                Thread.sleep(100);
            }
        }
    }

    interface Body {
        Map<String, Object> run() throws Exception;
    }

    /** Runs body: its reply, fail for a refusal or nothing held, else info. */
    Map<String, Object> call(Body body) {
        try {
            return body.run();
        } catch (Refused e) {
            return fail(e.getMessage());
        } catch (Fenced e) {
            return fail("fenced: " + e.getMessage());
        } catch (NotHeld e) {
            return fail("not held: " + e.getMessage());
        } catch (Unknown e) {
            return info(e.getMessage());
        } catch (Exception e) {
            log.warn("request failed", e);
            return info(e.toString());
        }
    }

    static Map<String, Object> ok() {
        return reply("ok", null);
    }

    static Map<String, Object> fail(String error) {
        return reply("fail", error);
    }

    static Map<String, Object> info(String error) {
        return reply("info", error);
    }

    /** A reply of type, with its error when there is one. */
    static Map<String, Object> reply(String type, String error) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("type", type);
        if (error != null) {
            r.put("error", error);
        }
        return r;
    }

    void reply(long id, Map<String, Object> r) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("id", id);
        line.putAll(r);
        emit(Json.write(line));
    }

    /** What the recipe reports, written as events. */
    final Events events = new Events() {
        @Override
        public void lost(String why) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("event", "lost");
            ev.put("error", why);
            log.warn("lost: {}", why);
            synchronized (state) {
                event(Json.write(ev));
                lostSeq++;
                state.notifyAll();
            }
        }

        @Override
        public void session(String id, String passwd) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("event", "session");
            ev.put("session_id", id);
            if (passwd != null) {
                ev.put("passwd", passwd);
            }
            log.info("session {}", id);
            event(Json.write(ev));
        }
    };

    /** Writes an event line, or holds it back while init runs. */
    void event(String line) {
        synchronized (proto) {
            if (deferred != null) {
                deferred.add(line);
            } else {
                emit(line);
            }
        }
    }

    void emit(String line) {
        synchronized (proto) {
            proto.print(line);
            proto.print('\n');
            proto.flush();
            if (proto.checkError()) {
                log.warn("writing to stdout failed"); // the harness is gone; stdin sees EOF too
            }
        }
    }

    /** Closes the recipe (bounded to 1.5 s), writes close's reply if any and halts. */
    void shutdown(int code, Long closeId) {
        synchronized (shutdownLock) {
            Thread t = new Thread(() -> {
                try {
                    if (initTried) {
                        recipe.close();
                    }
                } catch (Throwable e) {
                    log.warn("closing: {}", e.toString());
                }
            }, "zlc-close");
            t.setDaemon(true);
            t.start();
            try {
                t.join(1500);
            } catch (InterruptedException ignored) {
            }
            if (closeId != null) {
                reply(closeId, t.isAlive() ? info("closing did not finish within 1.5s") : ok());
            }
            System.err.flush();
            Runtime.getRuntime().halt(code);
        }
    }

    static String abbreviate(String s) {
        return s.length() <= 300 ? s : s.substring(0, 300) + "...";
    }

    static String str(Map<String, Object> m, String k) throws ProtocolError {
        Object v = m.get(k);
        if (!(v instanceof String)) {
            throw new ProtocolError("field " + k + ": want a string");
        }
        return (String) v;
    }

    /** Field k, an integer, or def when it is absent. */
    static long optNum(Map<String, Object> m, String k, long def) throws ProtocolError {
        return m.containsKey(k) ? num(m, k) : def;
    }

    static long num(Map<String, Object> m, String k) throws ProtocolError {
        Object v = m.get(k);
        if (!(v instanceof Long)) {
            throw new ProtocolError("field " + k + ": want an integer");
        }
        return (Long) v;
    }

    /** JSON for the protocol's lines: objects of strings, integers, booleans, null, lists and objects. */
    static final class Json {
        final String s;
        int i;

        private Json(String s) {
            this.s = s;
        }

        /** Parses one line holding one JSON object. */
        static Map<String, Object> parse(String line) throws ProtocolError {
            Json p = new Json(line);
            p.ws();
            Object v = p.value();
            p.ws();
            if (p.i != line.length() || !(v instanceof Map)) {
                throw new ProtocolError("not one JSON object");
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) v;
            return m;
        }

        void ws() {
            while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
        }

        /** After a member or element: true at close, false at a comma, else bad JSON. */
        boolean closes(char close) throws ProtocolError {
            ws();
            if (i >= s.length()) {
                throw bad();
            }
            char d = s.charAt(i++);
            if (d == close) {
                return true;
            }
            if (d != ',') {
                throw bad();
            }
            return false;
        }

        ProtocolError bad() {
            return new ProtocolError("bad JSON at byte " + i);
        }

        Object value() throws ProtocolError {
            if (i >= s.length()) {
                throw bad();
            }
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (i < s.length() && s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    ws();
                    if (i >= s.length() || s.charAt(i) != '"') {
                        throw bad();
                    }
                    String k = string();
                    ws();
                    if (i >= s.length() || s.charAt(i++) != ':') {
                        throw bad();
                    }
                    ws();
                    m.put(k, value());
                    if (closes('}')) {
                        return m;
                    }
                }
            }
            if (c == '[') {
                List<Object> l = new java.util.ArrayList<>();
                i++;
                ws();
                if (i < s.length() && s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    ws();
                    l.add(value());
                    if (closes(']')) {
                        return l;
                    }
                }
            }
            if (c == '"') {
                return string();
            }
            for (String w : new String[] {"true", "false", "null"}) {
                if (s.startsWith(w, i)) {
                    i += w.length();
                    return w.equals("null") ? null : Boolean.valueOf(w.equals("true"));
                }
            }
            int start = i;
            if (c == '-') {
                i++;
            }
            while (i < s.length() && (Character.isDigit(s.charAt(i)) || ".eE+-".indexOf(s.charAt(i)) >= 0)) {
                i++;
            }
            String n = s.substring(start, i);
            try {
                return Long.valueOf(n);
            } catch (NumberFormatException e) {
                try {
                    return Double.valueOf(n);
                } catch (NumberFormatException e2) {
                    throw bad();
                }
            }
        }

        String string() throws ProtocolError {
            StringBuilder b = new StringBuilder();
            i++; // the opening quote
            while (i < s.length()) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (i >= s.length()) {
                    break;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u':
                        if (i + 4 > s.length()) {
                            throw bad();
                        }
                        try {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        } catch (NumberFormatException x) {
                            throw bad();
                        }
                        i += 4;
                        break;
                    default: b.append(e);
                }
            }
            throw bad();
        }

        /** Writes v (a map, list, string, number, boolean or null) as JSON. */
        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String) {
                quote(b, (String) v);
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    quote(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List) {
                b.append('[');
                boolean first = true;
                for (Object o : (List<?>) v) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, o);
                }
                b.append(']');
            } else {
                quote(b, v.toString());
            }
        }

        static void quote(StringBuilder b, String s) {
            b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char c = s.charAt(k);
                switch (c) {
                    case '"': b.append("\\\""); break;
                    case '\\': b.append("\\\\"); break;
                    case '\n': b.append("\\n"); break;
                    case '\r': b.append("\\r"); break;
                    case '\t': b.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                }
            }
            b.append('"');
        }
    }
}
