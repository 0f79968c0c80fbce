// ZlcSpringWorker: Spring Integration's lock registries (spring-integration 7.1.2 from
// Maven Central, recipes/jvm/pom.xml) as a zlockcheck worker, on the protocol of
// ZlcWorker.java.
//
// Usage: java -cp BUILD:LIB/* ZlcSpringWorker RECIPE
//
//   spring-jdbc-postgres       JdbcLockRegistry over DefaultLockRepository on PostgreSQL
//   spring-jdbc-mariadb        the same on MariaDB (one server)
//   spring-redis-lock          RedisLockRegistry (its default spin lock) on one Redis
//   spring-redis-lock-renewed  the same with a renewal task scheduler: the registry
//                              renews a held lock every third of its TTL (since 6.4)
//
// Used as a Spring application uses them: obtain(path).tryLock(timeout) to acquire,
// unlock() to release, one registry per process, built as the application context would
// build the beans (a HikariCP pool with its defaults and a DataSourceTransactionManager;
// a LettuceConnectionFactory with Spring Data Redis's defaults), every setting at its
// default but three:
// - the TTL (JdbcLockRegistry's expireAfter, 10 s by default; RedisLockRegistry's, 60 s)
//   is init's session_timeout_ms, the TTL every lease recipe of a run uses;
// - the lock table's prefix is zlc_int_ (zlc_int_LOCK; Spring's is INT_), so that what
//   the run makes carries the tool's prefix. The worker creates the table from the
//   schema script Spring Integration ships (the INT_LOCK statement of
//   schema-postgresql.sql or schema-mysql.sql), as spring.integration.jdbc.
//   initialize-schema would; one that exists already is kept;
// - the Redis registry's key is "zlc-spring", so the lock's key is zlc-spring:PATH.
// Passwords come from the environment ($PGPASSWORD, $MYSQL_PWD, $REDISCLI_AUTH).
//
// What the registries tell a holder, and so what the worker reports:
// - No registry calls anyone when a lock expires under its holder. unlock() throws
//   ConcurrentModificationException ("Lock was released in the store due to
//   expiration") when the entry is gone or another's: release answers fail "not held".
// - spring-jdbc-* and spring-redis-lock: the caller knows its TTL. The worker reports
//   "lost" when the TTL has run out since the moment before tryLock was called, unless
//   it released first (the validity the caller can compute, as redisson-lock-lease).
// - spring-redis-lock-renewed: a renewal that finds the key gone or another's stops
//   the renewals and tells no one; the worker sends no "lost" event (as redisson-lock).
// An acquire's ok of the Redis recipes says where the lock lives (its key); the JDBC
// recipes' say nothing (the harness does not read zlc_int_LOCK).

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import org.springframework.data.redis.connection.RedisSentinelConfiguration;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.integration.jdbc.lock.DefaultLockRepository;
import org.springframework.integration.jdbc.lock.JdbcLockRegistry;
import org.springframework.integration.redis.util.RedisLockRegistry;
import org.springframework.integration.support.locks.DistributedLock;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;

public final class ZlcSpringWorker implements ZlcWorker.Recipe {

    static final List<String> RECIPES = List.of("spring-jdbc-postgres", "spring-jdbc-mariadb", "spring-redis-lock", "spring-redis-lock-renewed");

    /** The lock table's prefix: Spring's INT_ with the tool's own before it. */
    static final String PREFIX = "zlc_int_";

    /** RedisLockRegistry's registry key: the lock's key is REGISTRY:PATH. */
    static final String REGISTRY = "zlc-spring";

    public static void main(String[] args) {
        if (args.length != 1 || !RECIPES.contains(args[0])) {
            ZlcWorker.usage("usage: ZlcSpringWorker RECIPE (one of " + String.join(", ", RECIPES) + ")");
        }
        ZlcWorker.serve(() -> new ZlcSpringWorker(args[0]));
    }

    final String recipe;
    final List<AutoCloseable> closers = new ArrayList<>();
    final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "zlc-lease");
        t.setDaemon(true);
        return t;
    });
    ZlcWorker.Events events;
    DistributedLock lock;
    Map<String, Object> place;
    long ttlMs;
    boolean held;
    ScheduledFuture<?> leaseEnd;

    ZlcSpringWorker(String recipe) {
        this.recipe = recipe;
    }

    @Override
    public void init(ZlcWorker.Init init, ZlcWorker.Events events) throws Exception {
        if (!init.kind.equals("mutex")) {
            throw new ZlcWorker.Refused(recipe + " speaks the mutex workload, not " + init.kind);
        }
        if (init.fenced) {
            throw new ZlcWorker.Refused(recipe + " cannot fence: Spring's lock registries give no token");
        }
        this.events = events;
        this.ttlMs = init.sessionTimeoutMs;
        Duration ttl = Duration.ofMillis(ttlMs);
        switch (recipe) {
            case "spring-jdbc-postgres":
            case "spring-jdbc-mariadb":
                lock = jdbcRegistry(init, ttl).obtain(init.path);
                break;
            default:
                RedisLockRegistry r = redisRegistry(init, ttl);
                lock = r.obtain(init.path);
                place = new LinkedHashMap<>();
                place.put("keys", List.of(REGISTRY + ":" + init.path));
        }
    }

    /** The JDBC registry on the run's database, its table made if need be. */
    JdbcLockRegistry jdbcRegistry(ZlcWorker.Init init, Duration ttl) throws Exception {
        boolean pg = recipe.equals("spring-jdbc-postgres");
        String connect = String.join(",", init.connect);
        HikariConfig hc = new HikariConfig();
        hc.setPoolName("zlc-spring");
        if (pg) {
            jdbcPostgres(hc, connect);
        } else {
            if (init.connect.size() != 1) {
                throw new ZlcWorker.Refused(recipe + " locks on one MariaDB server; the run has " + init.connect.size() + " (run it with --nodes 1)");
            }
            jdbcMariaDB(hc, connect);
        }
        HikariDataSource ds = new HikariDataSource(hc);
        closers.add(ds);
        createTable(ds, pg ? "schema-postgresql.sql" : "schema-mysql.sql");
        DefaultLockRepository repo = new DefaultLockRepository(ds);
        repo.setPrefix(PREFIX);
        repo.setTransactionManager(new DataSourceTransactionManager(ds));
        repo.afterPropertiesSet();
        repo.afterSingletonsInstantiated();
        repo.start(); // reads the table: fails here when there is none
        closers.add(0, repo); // closed first: it deletes this client's rows, as at a context's shutdown
        return new JdbcLockRegistry(repo, ttl);
    }

    /** A libpq URL (postgres://user@h1:p1,h2:p2/db?k=v) as PgJDBC's URL and user. */
    static void jdbcPostgres(HikariConfig hc, String libpq) throws ZlcWorker.Refused {
        String rest = libpq.replaceFirst("^postgres(ql)?://", "");
        if (rest.equals(libpq)) {
            throw new ZlcWorker.Refused("connect: want a postgres:// URL, got " + libpq);
        }
        String query = "";
        int q = rest.indexOf('?');
        if (q >= 0) {
            query = rest.substring(q + 1);
            rest = rest.substring(0, q);
        }
        int at = rest.lastIndexOf('@');
        if (at >= 0) {
            hc.setUsername(rest.substring(0, at).replaceFirst(":.*", ""));
            rest = rest.substring(at + 1);
        }
        List<String> params = new ArrayList<>();
        for (String kv : query.split("&")) {
            if (kv.isEmpty() || kv.startsWith("target_session_attrs=")) {
                continue;
            }
            params.add(kv.replaceFirst("^connect_timeout=", "connectTimeout="));
        }
        // As the Go recipes ask libpq for a read-write server: after a failover, new
        // connections go to the promoted server.
        params.add("targetServerType=primary");
        hc.setJdbcUrl("jdbc:postgresql://" + rest + "?" + String.join("&", params));
        String password = System.getenv("PGPASSWORD");
        if (password != null && !password.isEmpty()) {
            hc.setPassword(password);
        }
    }

    /** A go-sql-driver DSN (user@tcp(host:port)/db) as MariaDB Connector/J's URL and user. */
    static void jdbcMariaDB(HikariConfig hc, String dsn) throws ZlcWorker.Refused {
        var m = java.util.regex.Pattern.compile("^([^@:]*)(?::[^@]*)?@tcp\\(([^)]+)\\)/([^?]*)").matcher(dsn);
        if (!m.find()) {
            throw new ZlcWorker.Refused("connect: want USER@tcp(HOST:PORT)/DATABASE, got " + dsn);
        }
        hc.setUsername(m.group(1));
        hc.setJdbcUrl("jdbc:mariadb://" + m.group(2) + "/" + m.group(3));
        String password = System.getenv("MYSQL_PWD");
        if (password != null && !password.isEmpty()) {
            hc.setPassword(password);
        }
    }

    /**
     * Creates the lock table from the INT_LOCK statement of Spring Integration's schema
     * script, with the tool's prefix. Workers start together: one that finds the table
     * made by another goes on (DefaultLockRepository.start reads the table, and fails
     * if it is missing after all).
     */
    static void createTable(HikariDataSource ds, String script) throws Exception {
        String path = "org/springframework/integration/jdbc/" + script;
        String sql;
        try (InputStream in = JdbcLockRegistry.class.getClassLoader().getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException("no " + path + " in spring-integration-jdbc");
            }
            sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        String create = null;
        for (String statement : sql.split(";")) {
            if (statement.contains("CREATE TABLE INT_LOCK ")) {
                create = statement.trim().replace("INT_", PREFIX);
            }
        }
        if (create == null) {
            throw new IllegalStateException(path + " has no CREATE TABLE INT_LOCK");
        }
        try {
            new JdbcTemplate(ds).execute(create);
        } catch (RuntimeException e) {
            org.slf4j.LoggerFactory.getLogger("zlc.spring").info("creating {}LOCK: {} (kept, if it exists)", PREFIX, e.getMessage());
        }
    }

    /**
     * The Redis registry on the run's first (or only) instance; under sentinels (init's
     * sentinel_master), on the primary they name, through Spring Data Redis's
     * RedisSentinelConfiguration (the master's name and the sentinels, Lettuce's
     * defaults otherwise), as its documentation shows.
     */
    RedisLockRegistry redisRegistry(ZlcWorker.Init init, Duration ttl) throws Exception {
        String password = System.getenv("REDISCLI_AUTH");
        LettuceConnectionFactory cf;
        if (init.sentinelMaster != null) {
            RedisSentinelConfiguration sc = new RedisSentinelConfiguration().master(init.sentinelMaster);
            for (String a : init.connect) {
                int colon = a.lastIndexOf(':');
                if (colon < 0) {
                    throw new ZlcWorker.Refused("connect: want host:port, got " + a);
                }
                sc.sentinel(a.substring(0, colon), Integer.parseInt(a.substring(colon + 1)));
            }
            if (password != null && !password.isEmpty()) {
                sc.setPassword(password);
            }
            cf = new LettuceConnectionFactory(sc);
        } else {
            String first = init.connect.get(0);
            int colon = first.lastIndexOf(':');
            if (colon < 0) {
                throw new ZlcWorker.Refused("connect: want host:port, got " + first);
            }
            RedisStandaloneConfiguration rc = new RedisStandaloneConfiguration(first.substring(0, colon), Integer.parseInt(first.substring(colon + 1)));
            if (password != null && !password.isEmpty()) {
                rc.setPassword(password);
            }
            cf = new LettuceConnectionFactory(rc);
        }
        cf.afterPropertiesSet();
        cf.start();
        closers.add(cf::destroy);
        RedisLockRegistry r = new RedisLockRegistry(cf, REGISTRY, ttl);
        closers.add(0, r::destroy);
        if (recipe.equals("spring-redis-lock-renewed")) {
            ThreadPoolTaskScheduler s = new ThreadPoolTaskScheduler();
            s.setThreadNamePrefix("zlc-renew-");
            s.setDaemon(true);
            s.initialize();
            closers.add(0, s::shutdown);
            r.setRenewalTaskScheduler(s);
        }
        return r;
    }

    /** Whether the caller can compute its lock's validity: no renewal runs. */
    boolean leased() {
        return !recipe.equals("spring-redis-lock-renewed");
    }

    @Override
    public ZlcWorker.Acquired acquire(long timeoutMs, String mode) throws Exception {
        if (held && leaseEnd != null && leaseEnd.isDone()) {
            // The TTL ran out and was reported lost; the application's finally block
            // would unlock: clear the registry's local hold (its entry may be another's).
            held = false;
            leaseEnd = null;
            try {
                lock.unlock();
            } catch (RuntimeException e) {
                org.slf4j.LoggerFactory.getLogger("zlc.spring").info("unlock after the TTL ran out: {}", e.toString());
            }
        }
        long before = System.nanoTime();
        if (!lock.tryLock(timeoutMs, TimeUnit.MILLISECONDS)) {
            return null;
        }
        held = true;
        if (leased()) {
            long left = ttlMs * 1_000_000L - (System.nanoTime() - before);
            leaseEnd = timer.schedule(() -> events.lost("the TTL of " + ttlMs + " ms ran out"), Math.max(0, left), TimeUnit.NANOSECONDS);
        }
        return new ZlcWorker.Acquired(null, place);
    }

    @Override
    public void release() throws Exception {
        if (!held) {
            throw new ZlcWorker.NotHeld("nothing held");
        }
        held = false;
        if (leaseEnd != null) {
            leaseEnd.cancel(false);
            leaseEnd = null;
        }
        try {
            lock.unlock();
        } catch (java.util.ConcurrentModificationException e) {
            throw new ZlcWorker.NotHeld("unlock: " + e.getMessage());
        }
    }

    @Override
    public void close() throws Exception {
        for (AutoCloseable c : closers) {
            try {
                c.close();
            } catch (Exception e) {
                org.slf4j.LoggerFactory.getLogger("zlc.spring").info("closing: {}", e.toString());
            }
        }
    }
}
