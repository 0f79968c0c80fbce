// ZlcCuratorWorker: Apache Curator's lock recipes as a zlockcheck worker, on the protocol of
// ZlcWorker.java: Curator as Debian ships it (libcurator-recipes-java 5.4), and compiled
// unchanged against Curator 5.9.0 from Maven Central for the curator-5.9-* recipes
// (recipes/jvm/pom.xml; the catalogue tells this worker the base recipe's name). Build
// and run it with recipes/curator/build.sh and run.sh (recipes/curator/README.md).
//
// Usage: java -cp "$(recipes/curator/classpath.sh OUTDIR)" ZlcCuratorWorker RECIPE
//
//   curator-mutex      InterProcessMutex                kinds: mutex, counter
//   curator-semaphore  InterProcessSemaphoreV2(permits) kinds: semaphore
//   curator-rwlock     InterProcessReadWriteLock        kinds: rwlock (mode read|write)
//   curator-reentrant  InterProcessMutex, re-entered    kinds: reentrant, mutex
//
// An unknown RECIPE is refused at init (fail), not at start.
//
// The client: CuratorFrameworkFactory with the init's connect string, session timeout
// S, connection timeout S, retry policy RetryUntilElapsed(S, 100 ms) (every Curator
// operation gives up after about 2 S without a usable connection) and no ensemble
// tracker. init waits at most 2 S for the first session; no session is "info" (the
// ensemble may be unreachable for now), a configuration the recipe cannot run is
// "fail".
//
// What each request does here (ZlcWorker.java says how it is answered):
//   acquire  acquire(timeout) on the recipe (rwlock: readLock()/writeLock() by mode).
//            false/null is fail "timeout" (Curator deleted its node; a semaphore lease
//            it could not delete is left to the janitor: it only costs a permit). ok
//            carries token = czxid of our lock node, found as the newest child of the
//            lock path (semaphore: the lease node) whose ephemeral owner is our
//            session. If the connection was suspended during the acquire, the grant
//            counts only if that node was seen afterwards, in the same session, with
//            no suspension since; else info (the node goes to the janitor, or, when it
//            was not found, Curator's own release deletes it). curator-mutex refuses an
//            acquire while holding (fail: InterProcessMutex would re-enter);
//            curator-reentrant re-enters (one level more, same node and token), as do
//            semaphore (one lease more) and rwlock.
//   release  the innermost level: first checks that its node still exists and is
//            owned by the current session (else fail "not held", and every level is
//            given up), then mutex.release() / lease.close() (not returnLease, which
//            swallows errors). Nothing held: fail "not held". Errors: info.
//   read     (kind counter, while holding) getData(counter_path): ok value (missing or
//            empty node: 0); connection trouble: info.
//   write    (kind counter, while holding) setData(counter_path), creating it if
//            missing; fenced: one multi of check(our lock node) + setData (or create),
//            which fails "fenced: lock node gone" once our node is gone. Counter ops go
//            through the session's ZooKeeper handle, not Curator's retrying builders,
//            so that a write whose reply is lost comes back as unknown (ZlcWorker
//            retries it, as an application's retry loop would).
//
// Events: Curator's ConnectionStateListener. SUSPENDED, LOST (or READ_ONLY) while
// holding anything reports "lost" and gives every hold up (their nodes go to the
// janitor, the recipe objects are replaced before the next acquire, since Curator
// keeps per-thread hold counts). A loss while an op that relies on the hold is in
// flight (read, write, a nested acquire, a release with levels left) makes that op
// answer info at once, since the harness ignores events while an op is in flight. A
// new session id after (RE)CONNECTED reports a "session" (id and password from the
// ZooKeeper handle); init reports its first.
//
// Threads (besides ZlcWorker's):
//   zlc-lock      runs every ZooKeeper/Curator call of an op. It is always the same
//                 thread, which InterProcessMutex needs (its ownership is per thread);
//                 ZlcWorker's main thread waits for it, so that it can answer "info" at
//                 once when the lock is lost while an op that relies on it runs.
//   zlc-janitor   deletes lock nodes of holds that were given up as lost but may still
//                 exist (a session that survived a SUSPENDED), so they block no one;
//                 only nodes still owned by the session that created them.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.state.ConnectionState;
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

public final class ZlcCuratorWorker implements ZlcWorker.Recipe, ZlcWorker.Counter {

    static final List<String> RECIPES = List.of("curator-mutex", "curator-semaphore", "curator-rwlock", "curator-reentrant");

    public static void main(String[] args) {
        if (args.length != 1) {
            ZlcWorker.usage("usage: ZlcCuratorWorker RECIPE (one of " + String.join(", ", RECIPES) + ")");
        }
        // ZooKeeper's client dumps its whole environment at INFO on every connect.
        ZlcWorker.setIfAbsent("org.slf4j.simpleLogger.log.org.apache.zookeeper.ZooKeeper", "warn");
        ZlcWorker.serve(() -> new ZlcCuratorWorker(args[0]));
    }

    // ------------------------------------------------------------------ state

    final String recipe;
    final Logger log = LoggerFactory.getLogger("zlc.curator");
    ZlcWorker.Events events;

    /** Guards everything below that the listener, janitor and op threads share. */
    final Object state = new Object();

    // Fixed by a successful init (written by the main thread before the lock thread or
    // listener can use them).
    volatile CuratorFramework client;
    /** The client an init is starting, so that a close meanwhile closes it. */
    volatile CuratorFramework starting;
    String kind = "";
    String path = "";
    int permits = 1;
    String counterPath = "";
    boolean fenced;

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

    ZlcCuratorWorker(String recipe) {
        this.recipe = recipe;
    }

    static java.util.concurrent.ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }

    // ------------------------------------------------------------------ closing

    @Override
    public void close() {
        CuratorFramework c;
        synchronized (state) {
            closing = true;
            c = client != null ? client : starting;
            holds.clear();
        }
        if (c != null) {
            c.close(); // ZlcWorker bounds how long it waits
        }
    }

    /** Closes a client of an init that did not succeed, waiting at most waitMs. */
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

    // ------------------------------------------------------------------ losses and sessions

    /** Gives every hold up and reports lost; call with state held. */
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
        events.lost(reason);
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

    /** Reports a session if the current session is new (fromInit: init's first). */
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
            events.session(hexSession(sid),
                    passwd != null && passwd.length > 0 ? Base64.getEncoder().encodeToString(passwd) : null);
        }
    }

    static String hexSession(long sid) {
        return "0x" + Long.toHexString(sid);
    }

    // ------------------------------------------------------------------ init

    @Override
    public void init(ZlcWorker.Init init, ZlcWorker.Events events) throws Exception {
        String connect = String.join(",", init.connect);
        long st = init.sessionTimeoutMs;
        String k = init.kind;
        if (!RECIPES.contains(recipe)) {
            throw new ZlcWorker.Refused("unknown recipe " + recipe + " (known: " + String.join(", ", RECIPES) + ")");
        }
        if (connect.trim().isEmpty()) {
            throw new ZlcWorker.Refused("init: connect is empty");
        }
        if (st <= 0 || st > 600_000) {
            throw new ZlcWorker.Refused("init: session_timeout_ms must be in 1..600000, got " + st);
        }
        if (!validPath(init.path)) {
            throw new ZlcWorker.Refused("init: path must be an absolute znode path, got \"" + init.path + "\"");
        }
        List<String> kinds = switch (recipe) {
            case "curator-mutex" -> List.of("mutex", "counter");
            case "curator-semaphore" -> List.of("semaphore");
            case "curator-rwlock" -> List.of("rwlock");
            default -> List.of("reentrant", "mutex");
        };
        if (!kinds.contains(k)) {
            throw new ZlcWorker.Refused(recipe + " does not support kind " + k + " (want " + String.join(" or ", kinds) + ")");
        }
        if (k.equals("semaphore")) {
            if (init.permits < 1 || init.permits > 1_000_000) {
                throw new ZlcWorker.Refused("init: a semaphore needs permits >= 1, got " + init.permits);
            }
        } else if (init.permits > 1 || init.permits < 0) {
            throw new ZlcWorker.Refused(recipe + ": kind " + k + " has one permit, got permits " + init.permits);
        }
        if (k.equals("counter") && (init.counterPath == null || !validPath(init.counterPath))) {
            throw new ZlcWorker.Refused("init: kind counter needs an absolute counter_path, got \"" + init.counterPath + "\"");
        }
        this.events = events;
        CuratorFramework c = start(connect, (int) st);
        kind = k;
        path = init.path;
        permits = k.equals("semaphore") ? (int) init.permits : 1;
        counterPath = init.counterPath == null ? "" : init.counterPath;
        fenced = init.fenced;
        try {
            newRecipeObjects(c);
        } catch (Exception e) {
            closeQuietly(c, 1500);
            throw new ZlcWorker.Refused("init: " + describe(e));
        }
        client = c;
        starting = null;
        log.info("worker {}: {} kind {} on {} (permits {}, fenced {}) via {}", init.worker, recipe, kind, path,
                permits, fenced, connect);
        reportSession(true);
    }

    /**
     * Starts a Curator client and waits at most twice the session timeout st for its
     * first session: the client, or Unknown (no session: the ensemble may just be
     * unreachable for now), or Refused (a connect string ZooKeeper cannot parse).
     */
    CuratorFramework start(String connect, int st) throws Exception {
        CuratorFramework c;
        try {
            // connectionTimeoutMs: how long one Curator operation waits for a
            // connection before failing (or retrying). RetryUntilElapsed(session
            // timeout, 100 ms) bounds each operation's retries to one session timeout,
            // so an op against a dead ensemble fails in about 2x the session timeout.
            // No ensemble tracker: the harness's connect string is the truth.
            c = CuratorFrameworkFactory.builder()
                    .connectString(connect)
                    .sessionTimeoutMs(st)
                    .connectionTimeoutMs(st)
                    .retryPolicy(new RetryUntilElapsed(st, 100))
                    .ensembleTracker(false)
                    .build();
        } catch (Exception e) {
            throw new ZlcWorker.Refused("init: building the Curator client: " + describe(e));
        }
        synchronized (state) {
            if (closing) {
                throw new ZlcWorker.Unknown("shutting down");
            }
            starting = c;
        }
        c.getConnectionStateListenable().addListener(this::onState);
        boolean connected;
        try {
            c.start();
            connected = c.blockUntilConnected(2 * st, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            closeQuietly(c, 1500);
            throw new ZlcWorker.Unknown("init interrupted");
        } catch (IllegalArgumentException e) {
            closeQuietly(c, 1500); // e.g. a connect string ZooKeeper cannot parse
            throw new ZlcWorker.Refused("init: starting the Curator client: " + describe(e));
        } catch (Exception e) {
            closeQuietly(c, 1500);
            throw new ZlcWorker.Unknown("init: starting the Curator client: " + describe(e));
        }
        if (!connected) {
            // Not a refusal of the configuration (the harness gives up on a recipe
            // whose init fails): the ensemble may just be unreachable for now.
            closeQuietly(c, 1500);
            throw new ZlcWorker.Unknown("init: no session with " + connect + " within " + (2 * st) + " ms");
        }
        return c;
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

    /**
     * Runs body on the lock thread and waits for it. If guard is set (the harness
     * believes we hold the lock while this op runs) and a loss is reported meanwhile,
     * it throws Unknown at once: the harness ignores lost events while an op is in
     * flight, and the op can no longer be trusted. The body's Refused, NotHeld,
     * Fenced and Unknown pass through; any other exception becomes Unknown.
     */
    <T> T runOp(String what, boolean guard, Callable<T> body) throws Exception {
        long seq;
        synchronized (state) {
            seq = lostSeq;
        }
        FutureTask<T> f = new FutureTask<>(body) {
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
                    throw new ZlcWorker.Unknown("lock lost while " + what + " was in flight: " + lostReason);
                }
                try {
                    state.wait(1000);
                } catch (InterruptedException e) {
                    throw new ZlcWorker.Unknown(what + " interrupted");
                }
            }
        }
        try {
            return f.get();
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof ZlcWorker.Refused || c instanceof ZlcWorker.NotHeld || c instanceof ZlcWorker.Fenced
                    || c instanceof ZlcWorker.Unknown) {
                throw (Exception) c;
            }
            log.warn("{}: {}", what, c.toString(), c);
            throw new ZlcWorker.Unknown(what + ": " + describe(c));
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

    @Override
    public ZlcWorker.Acquired acquire(long timeoutMs, String m) throws Exception {
        String mode = m == null ? "" : m;
        if (timeoutMs < 0) {
            throw new ZlcWorker.Refused("negative timeout_ms " + timeoutMs);
        }
        if (recipe.equals("curator-rwlock")) {
            if (!mode.equals("read") && !mode.equals("write")) {
                throw new ZlcWorker.Refused("kind rwlock needs mode read or write, got \"" + mode + "\"");
            }
        } else if (!mode.isEmpty()) {
            throw new ZlcWorker.Refused("kind " + kind + " has no modes, got mode \"" + mode + "\"");
        }
        boolean holding;
        synchronized (state) {
            holding = !holds.isEmpty();
        }
        if (holding && recipe.equals("curator-mutex")) {
            // InterProcessMutex would re-enter, which a mutex holder must not be
            // granted; curator-reentrant is the recipe for that.
            throw new ZlcWorker.Refused("already held (curator-mutex does not re-enter; use curator-reentrant)");
        }
        triggerJanitor();
        return runOp("acquire", holding, () -> doAcquire(timeoutMs, mode));
    }

    /** The acquire, on the lock thread: what it took, or null when the time ran out. */
    ZlcWorker.Acquired doAcquire(long timeoutMs, String mode) throws Exception {
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
                    return null;
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
                    return null;
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
        String doubtful = null;
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
                doubtful = "connection suspended during acquire";
            } else {
                holds.add(h);
                lastLoss = "";
            }
        }
        if (doubtful != null) {
            if (h.node == null) {
                releaseUnfound(h);
            }
            throw new ZlcWorker.Unknown(doubtful);
        }
        if (h.node == null) {
            log.warn("acquired, but our lock node under {} was not found (no token)", path);
        } else {
            log.info("holding {} (czxid {}, level {})", h.node, h.czxid, holdCount());
        }
        return new ZlcWorker.Acquired(h.czxid != 0 ? h.czxid : null, null);
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

    @Override
    public void release() throws Exception {
        Hold h;
        boolean rest;
        synchronized (state) {
            if (holds.isEmpty()) {
                throw new ZlcWorker.NotHeld(lastLoss.isEmpty() ? "nothing held" : lastLoss);
            }
            // Claim the hold: a lost event during the release is not sent for it (the
            // release's own outcome decides).
            h = holds.remove(holds.size() - 1);
            rest = !holds.isEmpty();
        }
        runOp("release", rest, () -> {
            doRelease(h);
            return null;
        });
    }

    /** The release of hold h, on the lock thread. */
    void doRelease(Hold h) throws Exception {
        long sid = sessionId();
        String node = h.node;
        String gone = null;
        if (node == null) {
            String name = h.lease != null ? "lease-" : h.mode == null ? "lock-" : h.mode.equals("read") ? "__READ__" : "__WRIT__";
            String[] found = findOwnNode(h.lease != null ? path + "/leases" : path, name, h.session);
            if (found == null) {
                gone = "our lock node is gone";
            } else {
                node = found[0];
            }
        }
        if (gone == null) {
            Stat st = client.checkExists().forPath(node);
            if (st == null) {
                gone = "the lock node " + node + " was already gone";
            } else if (st.getEphemeralOwner() != sid) {
                gone = "the lock node " + node + " belongs to session " + hexSession(st.getEphemeralOwner())
                        + ", not to the current session " + hexSession(sid);
            }
        }
        if (gone != null) {
            giveUpAll(node, h.session);
            throw new ZlcWorker.NotHeld(gone);
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
            throw new ZlcWorker.NotHeld(describe(e));
        } catch (Exception e) {
            giveUpAll(node, h.session);
            throw new ZlcWorker.Unknown("release: " + describe(e));
        }
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

    /** Refuses a counter op of another kind, or while nothing is held. */
    void counterCheck(String op) throws Exception {
        if (!kind.equals("counter")) {
            throw new ZlcWorker.Refused(op + " needs kind counter (this worker runs kind " + kind + ")");
        }
        synchronized (state) {
            if (holds.isEmpty()) {
                throw new ZlcWorker.NotHeld(op + " is only allowed while holding the lock");
            }
        }
    }

    @Override
    public long read() throws Exception {
        counterCheck("read");
        return runOp("read", true, () -> {
            ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
            byte[] data;
            try {
                data = zk.getData(counterPath, false, null);
            } catch (KeeperException.NoNodeException e) {
                data = null;
            } catch (KeeperException e) {
                throw new ZlcWorker.Unknown("read " + counterPath + ": " + describe(e));
            }
            String s = data == null ? "" : new String(data, StandardCharsets.UTF_8).trim();
            if (s.isEmpty()) {
                return 0L;
            }
            try {
                return Long.parseLong(s);
            } catch (NumberFormatException e) {
                throw new ZlcWorker.Refused("counter " + counterPath + " holds \"" + ZlcWorker.abbreviate(s) + "\", not a decimal integer");
            }
        });
    }

    /** One attempt at the write (ZlcWorker retries one whose outcome is unknown). */
    @Override
    public void write(long value) throws Exception {
        counterCheck("write");
        Hold top;
        synchronized (state) {
            top = holds.get(holds.size() - 1);
        }
        runOp("write", true, () -> {
            doWrite(top, value);
            return null;
        });
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
    void doWrite(Hold top, long value) throws Exception {
        byte[] data = Long.toString(value).getBytes(StandardCharsets.UTF_8);
        String node = top.node;
        if (fenced && node == null) {
            String[] found = findOwnNode(path, "lock-", top.session);
            if (found == null) {
                throw new ZlcWorker.Fenced("lock node gone");
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
                return;
            } catch (KeeperException e) {
                KeeperException.Code code = e.code();
                if (!definite(code)) {
                    throw new ZlcWorker.Unknown("write " + counterPath + ": " + describe(e));
                }
                // A failed multi applied nothing. Which op failed decides what next.
                int failed = fenced ? failedOp(e) : 1;
                if (failed == 0 && code == KeeperException.Code.NONODE) {
                    throw new ZlcWorker.Fenced("lock node gone");
                }
                if (failed != 1) {
                    throw new ZlcWorker.Refused("write " + counterPath + " (fenced by " + node + "): " + describe(e));
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
                throw new ZlcWorker.Refused("write " + counterPath + ": " + describe(e));
            }
        }
        throw new ZlcWorker.Refused("write " + counterPath + ": gave up, the counter kept appearing and disappearing");
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

}
