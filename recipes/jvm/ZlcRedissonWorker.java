// ZlcRedissonWorker: Redisson's locks (redisson 3.52.0 from Maven Central,
// recipes/jvm/pom.xml) as a zlockcheck worker, on the protocol of ZlcWorker.java.
//
// Usage: java -cp BUILD:LIB/* ZlcRedissonWorker RECIPE
//
//   redisson-lock         RLock, tryLock(wait) with no lease: the watchdog renews the
//                         lock every third of lockWatchdogTimeout; kinds mutex, reentrant
//   redisson-lock-lease   RLock, tryLock(wait, lease): no watchdog, the lock expires
//                         after the lease; kind mutex
//   redisson-fenced       RFencedLock, tryLockAndGetToken(wait): the watchdog's lock,
//                         with a fencing token on every acquire; kind mutex
//   redisson-redlock      RedissonRedLock over one RLock per independent instance
//                         (deprecated by Redisson, still shipped), tryLock(wait) with
//                         the watchdog on each; kind mutex
//
// Used as Redisson's documentation tells users to: one RedissonClient per process
// (RedLock: one per instance, as its documentation shows), Redisson's defaults for
// everything but two settings. lockWatchdogTimeout (the watchdog's lease, 30 s by
// default) and the lease of redisson-lock-lease are init's session_timeout_ms, the
// TTL every Redis recipe of a run uses; the password comes from $REDISCLI_AUTH when
// set (zlockcheck run --connect). Single topology: useSingleServer on the first
// address; replicas: useMasterSlaveServers, the first address the master, the others
// its replicas (the harness's failover does not move the workers); RedLock: every
// address an instance.
//
// What Redisson tells a holder, and so what the worker reports:
// - The watchdog locks: nothing. When a renewal finds the lock gone (the key expired
//   or was lost by the server), Redisson stops renewing and logs; it calls no one.
//   The holder learns only at unlock, which throws IllegalMonitorStateException:
//   release answers fail "not held". The worker sends no "lost" event.
// - redisson-lock-lease: the caller knows its lease. The worker reports "lost" when
//   the lease has run out since the moment before tryLock was called (the validity
//   the caller can compute), unless it released first.
// An acquire's ok says where the lock lives: the lock's hash (its name, init's path)
// and its field, Redisson's lock name for this client and thread (id:threadId), which
// the harness reads as the key's value (docs/protocol.md). RedLock's fields differ per
// instance (one client each), so its acquires say nothing.

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonRedLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public final class ZlcRedissonWorker implements ZlcWorker.Recipe {

    static final List<String> RECIPES = List.of("redisson-lock", "redisson-lock-lease", "redisson-fenced", "redisson-redlock");

    public static void main(String[] args) {
        if (args.length != 1 || !RECIPES.contains(args[0])) {
            ZlcWorker.usage("usage: ZlcRedissonWorker RECIPE (one of " + String.join(", ", RECIPES) + ")");
        }
        ZlcWorker.serve(() -> new ZlcRedissonWorker(args[0]));
    }

    final String recipe;
    final List<RedissonClient> clients = new ArrayList<>();
    final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "zlc-lease");
        t.setDaemon(true);
        return t;
    });
    ZlcWorker.Events events;
    RLock lock;
    long leaseMs;
    int depth;
    ScheduledFuture<?> leaseEnd;

    ZlcRedissonWorker(String recipe) {
        this.recipe = recipe;
    }

    @Override
    @SuppressWarnings("deprecation") // RedissonRedLock: deprecated, and what teams still run
    public void init(ZlcWorker.Init init, ZlcWorker.Events events) throws Exception {
        boolean reentrant = init.kind.equals("reentrant") && recipe.equals("redisson-lock");
        if (!init.kind.equals("mutex") && !reentrant) {
            throw new ZlcWorker.Refused(recipe + " speaks the mutex workload" + (recipe.equals("redisson-lock") ? " and the reentrant one" : "") + ", not " + init.kind);
        }
        if (init.fenced) {
            throw new ZlcWorker.Refused(recipe + " cannot fence: the fenced counter is not written for Redisson yet");
        }
        this.events = events;
        this.leaseMs = init.sessionTimeoutMs;
        List<String> addrs = recipe.equals("redisson-redlock") ? init.connect : List.of(String.join(",", init.connect));
        for (String a : addrs) {
            clients.add(Redisson.create(config(a, init.sessionTimeoutMs)));
        }
        switch (recipe) {
            case "redisson-fenced":
                lock = clients.get(0).getFencedLock(init.path);
                break;
            case "redisson-redlock":
                RLock[] each = new RLock[clients.size()];
                for (int i = 0; i < each.length; i++) {
                    each[i] = clients.get(i).getLock(init.path);
                }
                lock = new RedissonRedLock(each);
                break;
            default:
                lock = clients.get(0).getLock(init.path);
        }
    }

    /** A client's configuration: Redisson's defaults, the watchdog's lease, the topology. */
    static Config config(String connect, long ttlMs) {
        Config c = new Config();
        c.setLockWatchdogTimeout(ttlMs);
        String[] addrs = connect.split(",");
        String password = System.getenv("REDISCLI_AUTH");
        if (addrs.length == 1) {
            var s = c.useSingleServer().setAddress("redis://" + addrs[0]);
            if (password != null && !password.isEmpty()) {
                s.setPassword(password);
            }
            return c;
        }
        var ms = c.useMasterSlaveServers().setMasterAddress("redis://" + addrs[0]);
        for (int i = 1; i < addrs.length; i++) {
            ms.addSlaveAddress("redis://" + addrs[i]);
        }
        if (password != null && !password.isEmpty()) {
            ms.setPassword(password);
        }
        return c;
    }

    @Override
    public ZlcWorker.Acquired acquire(long timeoutMs) throws Exception {
        if (leaseEnd != null && leaseEnd.isDone()) {
            depth = 0; // the lease ran out and was reported lost: nothing is held
            leaseEnd = null;
        }
        long before = System.nanoTime();
        Long token = null;
        boolean ok;
        switch (recipe) {
            case "redisson-fenced":
                token = ((RFencedLock) lock).tryLockAndGetToken(timeoutMs, TimeUnit.MILLISECONDS);
                ok = token != null;
                break;
            case "redisson-lock-lease":
                ok = lock.tryLock(timeoutMs, leaseMs, TimeUnit.MILLISECONDS);
                break;
            default:
                ok = lock.tryLock(timeoutMs, TimeUnit.MILLISECONDS);
        }
        if (!ok) {
            return null;
        }
        depth++;
        if (recipe.equals("redisson-lock-lease")) {
            long left = leaseMs * 1_000_000L - (System.nanoTime() - before);
            leaseEnd = timer.schedule(() -> events.lost("the lease of " + leaseMs + " ms ran out"), Math.max(0, left), TimeUnit.NANOSECONDS);
        }
        return new ZlcWorker.Acquired(token, place());
    }

    /** Where the lock lives: its hash and this client's and thread's field in it. */
    Map<String, Object> place() {
        if (recipe.equals("redisson-redlock")) {
            return null;
        }
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("keys", List.of(lock.getName()));
        p.put("value", clients.get(0).getId() + ":" + Thread.currentThread().getId());
        return p;
    }

    @Override
    public void release() throws Exception {
        if (depth == 0) {
            throw new ZlcWorker.NotHeld("nothing held");
        }
        depth--;
        if (leaseEnd != null) {
            leaseEnd.cancel(false);
            leaseEnd = null;
        }
        try {
            lock.unlock();
        } catch (IllegalMonitorStateException e) {
            depth = 0; // every level went with the lock
            throw new ZlcWorker.NotHeld("unlock: " + e.getMessage());
        }
    }

    @Override
    public void close() {
        for (RedissonClient c : clients) {
            c.shutdown(0, 1, TimeUnit.SECONDS);
        }
    }
}
