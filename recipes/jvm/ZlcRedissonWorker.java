// ZlcRedissonWorker: Redisson's locks (redisson 3.52.0 from Maven Central,
// recipes/jvm/pom.xml) as a zlockcheck worker, on the protocol of ZlcWorker.java.
//
// Usage: java -cp BUILD:LIB/* ZlcRedissonWorker RECIPE
//
//   redisson-lock         RLock, tryLock(wait) with no lease: the watchdog renews the
//                         lock every third of lockWatchdogTimeout; kinds mutex,
//                         reentrant, counter
//   redisson-lock-lease   RLock, tryLock(wait, lease): no watchdog, the lock expires
//                         after the lease; kinds mutex, counter
//   redisson-fenced       RFencedLock, tryLockAndGetToken(wait): the watchdog's lock,
//                         with a fencing token on every acquire; kinds mutex, counter
//                         (fenced or not)
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
// its replicas (the harness's failover does not move the workers); sentinel (init's
// sentinel_master): useSentinelServers, connect naming the sentinels; RedLock: every
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
// The counter workload's counter is a string key on the lock's instance (init's
// counter_path), read and written through Redisson's RScript. Fenced (redisson-fenced
// only), it is Kleppmann's fenced storage, as the Go Redis recipes' (recipes/
// redis_counter.go): the highest token seen is kept in COUNTER:fence, and a read or
// write with a lower token is refused (fail "fenced: ...").
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
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

public final class ZlcRedissonWorker implements ZlcWorker.Recipe, ZlcWorker.Counter {

    static final List<String> RECIPES = List.of("redisson-lock", "redisson-lock-lease", "redisson-fenced", "redisson-redlock");

    /**
     * The fenced read: KEYS[1] the counter, KEYS[2] its highest token seen, ARGV[1] the
     * hold's token; the counter's value, or the error FENCED for an older token.
     */
    static final String FENCED_READ = "local seen = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
            + "if tonumber(ARGV[1]) < seen then return redis.error_reply('FENCED token ' .. ARGV[1] .. ' is older than ' .. seen) end\n"
            + "redis.call('SET', KEYS[2], ARGV[1])\n"
            + "return redis.call('GET', KEYS[1])";

    /** The fenced write: as FENCED_READ, then sets KEYS[1] to ARGV[2]. */
    static final String FENCED_WRITE = "local seen = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
            + "if tonumber(ARGV[1]) < seen then return redis.error_reply('FENCED token ' .. ARGV[1] .. ' is older than ' .. seen) end\n"
            + "redis.call('SET', KEYS[2], ARGV[1])\n"
            + "redis.call('SET', KEYS[1], ARGV[2])\n"
            + "return 1";

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
    String counter;
    boolean fenced;
    Long token;

    ZlcRedissonWorker(String recipe) {
        this.recipe = recipe;
    }

    @Override
    @SuppressWarnings("deprecation") // RedissonRedLock: deprecated, and what teams still run
    public void init(ZlcWorker.Init init, ZlcWorker.Events events) throws Exception {
        List<String> kinds = switch (recipe) {
            case "redisson-lock" -> List.of("mutex", "reentrant", "counter");
            case "redisson-redlock" -> List.of("mutex");
            default -> List.of("mutex", "counter");
        };
        if (!kinds.contains(init.kind)) {
            throw new ZlcWorker.Refused(recipe + " speaks the " + String.join(", ", kinds) + " workloads, not " + init.kind);
        }
        if (init.fenced && !recipe.equals("redisson-fenced")) {
            throw new ZlcWorker.Refused(recipe + " cannot fence: it has no token (redisson-fenced has)");
        }
        this.counter = init.counterPath;
        this.fenced = init.fenced;
        this.events = events;
        this.leaseMs = init.sessionTimeoutMs;
        if (init.sentinelMaster != null) {
            if (recipe.equals("redisson-redlock")) {
                throw new ZlcWorker.Refused("init: sentinel_master " + init.sentinelMaster + ": recipe " + recipe + " has no Sentinel mode (RedLock is over independent primaries)");
            }
            clients.add(Redisson.create(sentinelConfig(init.connect, init.sentinelMaster, init.sessionTimeoutMs)));
        } else {
            List<String> addrs = recipe.equals("redisson-redlock") ? init.connect : List.of(String.join(",", init.connect));
            for (String a : addrs) {
                clients.add(Redisson.create(config(a, init.sessionTimeoutMs)));
            }
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

    /**
     * A client of the primary the sentinels name master, as Redisson's documentation
     * shows (useSentinelServers: the master's name and the sentinels' addresses),
     * Redisson's defaults otherwise; it follows the sentinels' +switch-master.
     */
    static Config sentinelConfig(List<String> sentinels, String master, long ttlMs) {
        Config c = new Config();
        c.setLockWatchdogTimeout(ttlMs);
        var s = c.useSentinelServers().setMasterName(master);
        for (String a : sentinels) {
            s.addSentinelAddress("redis://" + a);
        }
        String password = System.getenv("REDISCLI_AUTH");
        if (password != null && !password.isEmpty()) {
            s.setPassword(password);
        }
        return c;
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
    public ZlcWorker.Acquired acquire(long timeoutMs, String mode) throws Exception {
        if (leaseEnd != null && leaseEnd.isDone()) {
            depth = 0; // the lease ran out and was reported lost: nothing is held
            leaseEnd = null;
        }
        long before = System.nanoTime();
        token = null;
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
    public long read() throws Exception {
        RScript script = clients.get(0).getScript(StringCodec.INSTANCE);
        Object v;
        if (fenced) {
            v = fencedEval(script, FENCED_READ, RScript.ReturnType.VALUE);
        } else {
            v = clients.get(0).getBucket(counter, StringCodec.INSTANCE).get();
        }
        return v == null ? 0 : Long.parseLong(v.toString());
    }

    @Override
    public void write(long value) throws Exception {
        if (fenced) {
            fencedEval(clients.get(0).getScript(StringCodec.INSTANCE), FENCED_WRITE, RScript.ReturnType.INTEGER, String.valueOf(value));
        } else {
            clients.get(0).getBucket(counter, StringCodec.INSTANCE).set(String.valueOf(value));
        }
    }

    /** Runs a fenced script with the hold's token: Fenced when the counter saw a newer one. */
    Object fencedEval(RScript script, String lua, RScript.ReturnType type, String... more) throws ZlcWorker.Fenced {
        List<Object> args = new ArrayList<>();
        args.add(String.valueOf(token));
        args.addAll(List.of(more));
        try {
            return script.eval(RScript.Mode.READ_WRITE, lua, type, List.of(counter, counter + ":fence"), args.toArray());
        } catch (RuntimeException e) {
            if (String.valueOf(e.getMessage()).contains("FENCED")) {
                throw new ZlcWorker.Fenced(e.getMessage());
            }
            throw e;
        }
    }

    @Override
    public void close() {
        for (RedissonClient c : clients) {
            c.shutdown(0, 1, TimeUnit.SECONDS);
        }
    }
}
