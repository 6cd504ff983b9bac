package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// config is the process configuration: environment variables, overridden by flags.
type config struct {
	httpAddr   string
	mysqlDSN   string // empty: the embedded SQLite database
	redisAddr  string // empty: the embedded Redis server, unless redisSentinel names one
	adminToken string
	lock       string
	lockTTL    time.Duration
	// orderTimeout is each order's deadline; zero: order.DefaultTimeout or half lockTTL.
	orderTimeout time.Duration
	// maxInflight bounds the orders in progress; zero: app.InflightPerConn × the DB pool.
	maxInflight int
	orderDelay  time.Duration
	dataDir     string // where the embedded database lives; empty: a fresh temporary directory
	// redlockAddrs are RedLock's nodes; nil: app.DefaultRedLockAddrs, or embedded ones.
	redlockAddrs []string
	zkAddrs      []string // the ZooKeeper ensemble
	etcdAddrs    []string // the etcd cluster
	// redisSentinel, instead of redisAddr, is a primary that Sentinel watches.
	redisSentinel app.RedisSentinel
	orderMode     string // app.ModeSync or app.ModeAsync
	stream        async.Config
	pprofAddr     string // loopback address of the profiling listener; empty: none
	fencing       string // app.FencingOn, FencingOff or FencingAuto
	// fenceRetention is how long a lock_fences row outlives its last claim.
	fenceRetention time.Duration
}

// envFlag documents one setting: its environment variable and flag.
type envFlag struct {
	env, flag, def, usage string
}

var settings = []envFlag{
	{"SECKILL_HTTP_ADDR", "http-addr", ":8080", "address to listen on"},
	{"SECKILL_MYSQL_DSN", "mysql-dsn", "", "go-sql-driver DSN of MySQL/MariaDB; empty runs on the embedded SQLite database"},
	{"SECKILL_REDIS_ADDR", "redis-addr", "", "host:port of Redis; empty runs on the embedded Redis server"},
	{"SECKILL_REDIS_SENTINEL", "redis-sentinel", "", "master-name@host:port,host:port,... of Redis Sentinel, instead of SECKILL_REDIS_ADDR: " +
		"the primary the sentinels monitor under that name, followed on failover"},
	{"SECKILL_ADMIN_TOKEN", "admin-token", "", "bearer token for POST /api/vouchers; empty disables it"},
	{"SECKILL_LOCK", "lock", "redis", "per-user order guard: " + app.LockKindNames()},
	{"SECKILL_LOCK_TTL", "lock-ttl", "10s", "expiry of the per-user order lock"},
	{"SECKILL_ORDER_TIMEOUT", "order-timeout", "", "each order's deadline, shorter than the lock TTL (with redlock, than its validity), and each voucher request's; empty: 2s, or half the lock TTL if that is shorter"},
	{"SECKILL_MAX_INFLIGHT", "max-inflight", "0", "orders an instance works on at once, the rest answered 503 overloaded; 0: 2 per database connection (64), in async mode 1024 admissions"},
	{"SECKILL_ORDER_DELAY", "order-delay", "0s", "simulated business processing inside the critical section"},
	{"SECKILL_DATA_DIR", "data-dir", "", "directory of the embedded database; empty uses a new temporary directory"},
	{"SECKILL_REDLOCK_ADDRS", "redlock-addrs", "", "comma-separated host:port of the independent Redis nodes of SECKILL_LOCK=redlock; " +
		"empty: " + strings.Join(app.DefaultRedLockAddrs, ",") + " (scripts/services.sh), or five embedded Redis servers with the embedded stores"},
	{"SECKILL_ZOOKEEPER_ADDRS", "zookeeper-addrs", "127.0.0.1:2181", "comma-separated host:port of the ZooKeeper ensemble of SECKILL_LOCK=zookeeper"},
	{"SECKILL_ETCD_ENDPOINTS", "etcd-endpoints", "127.0.0.1:2379", "comma-separated host:port of the etcd cluster of SECKILL_LOCK=etcd"},
	{"SECKILL_ORDER_MODE", "order-mode", "sync", "sync: each order one database transaction (201); async: admitted in Redis (202 pending), written by the stream writer"},
	{"SECKILL_ADMIT_BATCH", "admit-batch", strconv.Itoa(async.DefaultAdmitBatch), "async: most orders of one voucher one admission script call decides: those that arrived while its previous call was under way (1 to 256; 1: a call per order)"},
	{"SECKILL_STREAM_BATCH", "stream-batch", strconv.Itoa(async.DefaultBatch), "async: most orders the writer commits in one transaction (1 to 5000)"},
	{"SECKILL_STREAM_LINGER", "stream-linger", async.DefaultLinger.String(), "async: how long the writer waits for a batch to fill"},
	{"SECKILL_STREAM_CLAIM_IDLE", "stream-claim-idle", async.DefaultClaimIdle.String(), "async: idle time after which another instance's unacknowledged orders are claimed (XAUTOCLAIM)"},
	{"SECKILL_STREAM_MAX_ATTEMPTS", "stream-max-attempts", strconv.Itoa(async.DefaultMaxAttempts), "async: refusals by the database before an order is dead-lettered and its reservation released"},
	{"SECKILL_STREAM_DB_DOWN", "stream-db-down", async.DefaultDBDownBound.String(), "async: how long the writer may fail to reach the database before /readyz fails"},
	{"SECKILL_STREAM_RETENTION", "stream-retention", async.DefaultRetention.String(), "async: how long after a sale's end, once none of its orders is pending, its users, statuses and dead letters stay in Redis before a writer " +
		"copies the dead letters to the database and deletes them (at least 1m)"},
	{"SECKILL_PPROF_ADDR", "pprof-addr", "", "loopback host:port to serve Go's profiles on (/debug/pprof/, serve only); empty: none"},
	{"SECKILL_FENCING", "fencing", app.FencingAuto, "on|off|auto: check each order write's fencing token in the database (lock_fences); auto is on for the locks that hand out tokens (" +
		app.TokenKindNames() + "), on with another lock refuses to start; an explicit on lets SECKILL_ORDER_TIMEOUT exceed SECKILL_LOCK_TTL"},
	{"SECKILL_FENCE_RETENTION", "fence-retention", app.DefaultFenceRetention.String(), "with fencing on, how long a lock_fences row (one per user) outlives its last claim before the instances delete it; " +
		"at least a minute and ten order deadlines (unfenced, not used and not checked)"},
}

// secretSettings are the settings whose values must not be printed: the admin token, and the
// DSN with the database password.
var secretSettings = map[string]bool{"SECKILL_ADMIN_TOKEN": true, "SECKILL_MYSQL_DSN": true}

// parseConfig reads the environment through getenv, then the flags in args. extra, if not
// nil, declares a subcommand's own flags on the same set.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer, extra func(*flag.FlagSet)) (config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if extra != nil {
		extra(fs)
	}
	vals := make(map[string]*string, len(settings))
	for _, s := range settings {
		def := s.def
		if v := getenv(s.env); v != "" && !secretSettings[s.env] {
			def = v
		}
		vals[s.env] = fs.String(s.flag, def, s.usage+" ($"+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	// A secret's environment value is no flag default: the usage (-h, or a mistyped flag,
	// printed to stderr and so to the log) shows every default.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, s := range settings {
		if v := getenv(s.env); secretSettings[s.env] && v != "" && !set[s.flag] {
			*vals[s.env] = v
		}
	}
	if extra == nil {
		if err := noArguments(fs); err != nil {
			return config{}, err
		}
	}
	cfg := config{
		httpAddr:   *vals["SECKILL_HTTP_ADDR"],
		mysqlDSN:   *vals["SECKILL_MYSQL_DSN"],
		redisAddr:  *vals["SECKILL_REDIS_ADDR"],
		adminToken: *vals["SECKILL_ADMIN_TOKEN"],
		lock:       *vals["SECKILL_LOCK"],
		dataDir:    *vals["SECKILL_DATA_DIR"],
		pprofAddr:  *vals["SECKILL_PPROF_ADDR"],
		fencing:    *vals["SECKILL_FENCING"],
	}
	if err := checkAdminToken(cfg.adminToken); err != nil {
		return config{}, err
	}
	if err := checkHTTPAddr(cfg.httpAddr); err != nil {
		return config{}, err
	}
	if cfg.redisAddr != "" {
		// Checked here, not at the first dial: go-redis dials lazily, so an instance with an
		// address that can never work started, answered every order 503 and logged the dial
		// error once a second.
		if err := checkRedisAddr(cfg.redisAddr); err != nil {
			return config{}, err
		}
	}
	if err := checkPprofAddr(cfg.pprofAddr); err != nil {
		return config{}, err
	}
	// The asynchronous mode takes no per-user lock, so the rules that hold the lock's settings
	// together (the whole-millisecond lease, the fencing mode's lock, RedLock's nodes listed
	// once, and OrderConfig's: the deadline inside the lease or its validity, the simulated
	// work inside the deadline) refuse no async start. It still reads each setting, and
	// refuses one that is no value of its kind.
	asyncMode := *vals["SECKILL_ORDER_MODE"] == app.ModeAsync
	var err error
	if cfg.lockTTL, err = parseDuration("SECKILL_LOCK_TTL", *vals["SECKILL_LOCK_TTL"], time.Millisecond); err != nil {
		return config{}, err
	}
	if cfg.lockTTL%time.Millisecond != 0 && !asyncMode {
		// Redis takes the lease in whole milliseconds (PX, and the scripts' Milliseconds()),
		// truncated: 1.5ms would be a 1 ms lease under an order deadline checked against 1.5 ms.
		return config{}, fmt.Errorf("SECKILL_LOCK_TTL=%q: want whole milliseconds (Redis's PX would truncate it to %s)",
			*vals["SECKILL_LOCK_TTL"], cfg.lockTTL.Truncate(time.Millisecond))
	}
	if cfg.orderDelay, err = parseDuration("SECKILL_ORDER_DELAY", *vals["SECKILL_ORDER_DELAY"], 0); err != nil {
		return config{}, err
	}
	if v := *vals["SECKILL_ORDER_TIMEOUT"]; v != "" {
		if cfg.orderTimeout, err = parseDuration("SECKILL_ORDER_TIMEOUT", v, time.Millisecond); err != nil {
			return config{}, err
		}
	}
	if cfg.maxInflight, err = strconv.Atoi(*vals["SECKILL_MAX_INFLIGHT"]); err != nil || cfg.maxInflight < 0 {
		return config{}, fmt.Errorf("SECKILL_MAX_INFLIGHT=%q: want a number of orders, 0 or more", *vals["SECKILL_MAX_INFLIGHT"])
	}
	if cfg.redisSentinel, err = parseSentinel(*vals["SECKILL_REDIS_SENTINEL"]); err != nil {
		return config{}, err
	}
	if err := cfg.checkStores(); err != nil {
		return config{}, err
	}
	if err := cfg.checkDataDir(); err != nil {
		return config{}, err
	}
	if _, ok := app.LockKinds[cfg.lock]; !ok {
		return config{}, fmt.Errorf("SECKILL_LOCK=%q: want one of %s", cfg.lock, app.LockKindNames())
	}
	// The order mode first: whether the orders are fenced, and so what the order settings
	// must satisfy, depends on it (OrderConfig).
	if err := cfg.parseAsync(vals); err != nil {
		return config{}, err
	}
	fencingErr := app.CheckFencingMode(cfg.fencing)
	if !asyncMode {
		_, fencingErr = app.Fences(cfg.lock, cfg.fencing)
	}
	if fencingErr != nil {
		return config{}, fmt.Errorf("SECKILL_FENCING=%q, SECKILL_LOCK=%q: %w", cfg.fencing, cfg.lock, fencingErr)
	}
	o, err := cfg.appConfig().OrderConfig()
	if ve := (*app.ValidityError)(nil); errors.As(err, &ve) {
		// One setting is at fault, and the message names it: the lease when it leaves no
		// validity at all, else the order deadline (maybe a default the user never set).
		if ve.Validity <= 0 {
			return config{}, fmt.Errorf("SECKILL_LOCK_TTL=%q with SECKILL_LOCK=%s: %w; want a longer lease", *vals["SECKILL_LOCK_TTL"], cfg.lock, err)
		}
		return config{}, fmt.Errorf("%s with SECKILL_LOCK=%s and SECKILL_LOCK_TTL=%q: %w; want a shorter deadline or a longer lease",
			orderTimeoutSetting(o), cfg.lock, *vals["SECKILL_LOCK_TTL"], err)
	}
	if err != nil {
		return config{}, fmt.Errorf("SECKILL_ORDER_TIMEOUT, SECKILL_LOCK_TTL, SECKILL_ORDER_DELAY, SECKILL_FENCING, SECKILL_LOCK: %w", err)
	}
	if o.Timeout == 0 && o.EffectiveTimeout() < time.Millisecond {
		// The default deadline, half the lease, under the floor an explicit one is held to.
		return config{}, fmt.Errorf("SECKILL_LOCK_TTL=%q: %s is under the 1ms an order's deadline must have; want a lease of at least 2ms, or set SECKILL_ORDER_TIMEOUT",
			*vals["SECKILL_LOCK_TTL"], orderTimeoutSetting(o))
	}
	if span := orderSpan(o); span > maxOrderSpan {
		name := "SECKILL_LOCK_TTL"
		if span != o.LockTTL {
			name = "SECKILL_ORDER_TIMEOUT" // longer than the lease, as explicit fencing or the async mode allows
		}
		return config{}, fmt.Errorf("%s=%q: at most %s: the HTTP server's write timeout and the shutdown grace are the longest an order may run + %s",
			name, *vals[name], maxOrderSpan, writeTimeoutSlack)
	}
	// The retention bounds the fence rows, which only fenced orders write: unfenced, it is
	// still read (a typo is refused) but not held to its floors.
	minRetention := time.Duration(0)
	if o.Fencing {
		minRetention = time.Minute
	}
	if cfg.fenceRetention, err = parseDuration("SECKILL_FENCE_RETENTION", *vals["SECKILL_FENCE_RETENTION"], minRetention); err != nil {
		return config{}, err
	}
	if _, err := cfg.appConfig().EffectiveFenceRetention(); err != nil {
		return config{}, fmt.Errorf("SECKILL_FENCE_RETENTION, SECKILL_ORDER_TIMEOUT: %w", err)
	}
	if cfg.redlockAddrs, err = parseAddrs("SECKILL_REDLOCK_ADDRS", *vals["SECKILL_REDLOCK_ADDRS"]); err != nil {
		return config{}, err
	}
	// RedLock's quorum counts nodes: a node named twice answers the start's PING twice but
	// grants at most one of the votes (its second SET NX finds the key).
	for i, a := range cfg.redlockAddrs {
		if slices.Contains(cfg.redlockAddrs[:i], a) && !asyncMode {
			return config{}, fmt.Errorf("SECKILL_REDLOCK_ADDRS=%q: node %q is listed twice; RedLock's nodes must be independent servers",
				*vals["SECKILL_REDLOCK_ADDRS"], a)
		}
	}
	if cfg.zkAddrs, err = parseAddrs("SECKILL_ZOOKEEPER_ADDRS", *vals["SECKILL_ZOOKEEPER_ADDRS"]); err != nil {
		return config{}, err
	}
	if cfg.etcdAddrs, err = parseAddrs("SECKILL_ETCD_ENDPOINTS", *vals["SECKILL_ETCD_ENDPOINTS"]); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// parseAsync reads SECKILL_ORDER_MODE and the stream writer's settings.
func (c *config) parseAsync(vals map[string]*string) error {
	c.orderMode = *vals["SECKILL_ORDER_MODE"]
	if c.orderMode != app.ModeSync && c.orderMode != app.ModeAsync {
		return fmt.Errorf("SECKILL_ORDER_MODE=%q: want %s or %s", c.orderMode, app.ModeSync, app.ModeAsync)
	}
	var err error
	for _, n := range []struct {
		env string
		dst *int
		max int
	}{{"SECKILL_ADMIT_BATCH", &c.stream.AdmitBatch, async.MaxAdmitBatch}, {"SECKILL_STREAM_BATCH", &c.stream.Batch, async.MaxBatch}, {"SECKILL_STREAM_MAX_ATTEMPTS", &c.stream.MaxAttempts, math.MaxInt}} {
		if *n.dst, err = strconv.Atoi(*vals[n.env]); err != nil || *n.dst < 1 || *n.dst > n.max {
			if n.max < math.MaxInt {
				return fmt.Errorf("%s=%q: want a number from 1 to %d", n.env, *vals[n.env], n.max)
			}
			return fmt.Errorf("%s=%q: want a number, 1 or more", n.env, *vals[n.env])
		}
	}
	if c.stream.Linger, err = parseDuration("SECKILL_STREAM_LINGER", *vals["SECKILL_STREAM_LINGER"], 0); err != nil {
		return err
	}
	if c.stream.Linger == 0 {
		c.stream.Linger = -1 // no linger (zero in async.Config takes the default)
	}
	if c.stream.ClaimIdle, err = parseDuration("SECKILL_STREAM_CLAIM_IDLE", *vals["SECKILL_STREAM_CLAIM_IDLE"], 100*time.Millisecond); err != nil {
		return err
	}
	if limit := async.MaxLinger(c.stream.ClaimIdle); c.stream.Linger > limit {
		return fmt.Errorf("SECKILL_STREAM_LINGER=%q: at most %s, a quarter of a batch's deadline with SECKILL_STREAM_CLAIM_IDLE=%s; "+
			"a longer one makes every batch that waits for more orders miss its deadline and be claimed again",
			*vals["SECKILL_STREAM_LINGER"], limit, c.stream.ClaimIdle)
	}
	if c.stream.DBDownBound, err = parseDuration("SECKILL_STREAM_DB_DOWN", *vals["SECKILL_STREAM_DB_DOWN"], time.Second); err != nil {
		return err
	}
	c.stream.Retention, err = parseDuration("SECKILL_STREAM_RETENTION", *vals["SECKILL_STREAM_RETENTION"], time.Minute)
	return err
}

// noArguments refuses arguments left after fs's flags, for a command that takes none: flag
// stops at the first argument that is not a flag, and every flag after it would be ignored
// without a word (`serve -lock redlock x -fencing off` runs with auto fencing).
func noArguments(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("%s takes no arguments, got %q (flags after it were not read)", fs.Name(), fs.Args())
	}
	return nil
}

// checkAdminToken refuses an admin token that no request can present, which would leave the
// admin API answering 401 to everyone: net/http trims the white space that ends a header
// value and refuses control characters in one (a token read from a file with its trailing
// newline, say). White space before the token can be sent (a second space after "Bearer").
// The token itself is never echoed.
func checkAdminToken(token string) error {
	bad := strings.ContainsFunc(token, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }) ||
		strings.TrimRight(token, " \t") != token
	if bad {
		return errors.New("SECKILL_ADMIN_TOKEN: no Authorization header can carry it (it ends in white space or holds a control character, a newline say); " +
			"the admin API would refuse every caller")
	}
	return nil
}

// checkHTTPAddr refuses a listen address without a port: net.Listen takes "" and "host:" as
// port 0, a random port (on every interface for ""), which no proxy or probe would find.
// An explicit port 0 is still accepted.
func checkHTTPAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		err = checkListenPort(port)
	}
	if err != nil {
		return fmt.Errorf("SECKILL_HTTP_ADDR=%q: want [host]:port: %w", addr, err)
	}
	return nil
}

// checkListenPort refuses a port that net.Listen would take as a random one (empty), or
// refuse only once the stores have been opened (no number from 0 to 65535).
func checkListenPort(port string) error {
	if port == "" {
		return errors.New("no port")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is no number from 0 to 65535", port)
	}
	return nil
}

// parseAddrs reads a comma-separated list of host:port, each with a port from 1 to 65535;
// empty is nil.
func parseAddrs(name, v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err == nil && (host == "" || port == "") {
			err = errors.New("want host:port")
		}
		if err == nil {
			// Nothing can be reached on port 0: a connection to it is refused.
			var n uint64
			if n, err = strconv.ParseUint(port, 10, 16); err == nil && n == 0 {
				err = errors.New("port 0: no server can be reached on it")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s=%q: address %q: %w", name, v, a, err)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// checkRedisAddr refuses a SECKILL_REDIS_ADDR that the Redis client could never dial. The
// client takes the value as it stands, as one address: a list, or white space that a list's
// entries may have around them, is part of what it would dial.
func checkRedisAddr(v string) error {
	switch {
	case strings.Contains(v, ","):
		return fmt.Errorf("SECKILL_REDIS_ADDR=%q: want one host:port, not a list (a list of sentinels is SECKILL_REDIS_SENTINEL's)", v)
	case strings.ContainsFunc(v, unicode.IsSpace):
		return fmt.Errorf("SECKILL_REDIS_ADDR=%q: white space in the address, which the client would dial as part of it", v)
	}
	_, err := parseAddrs("SECKILL_REDIS_ADDR", v)
	return err
}

// parseSentinel reads SECKILL_REDIS_SENTINEL, master-name@host:port,...; empty is none.
func parseSentinel(v string) (app.RedisSentinel, error) {
	if strings.TrimSpace(v) == "" {
		return app.RedisSentinel{}, nil
	}
	master, addrs, ok := strings.Cut(v, "@")
	master = strings.TrimSpace(master)
	if !ok || master == "" || strings.TrimSpace(addrs) == "" {
		return app.RedisSentinel{}, fmt.Errorf("SECKILL_REDIS_SENTINEL=%q: want master-name@host:port,host:port,...", v)
	}
	list, err := parseAddrs("SECKILL_REDIS_SENTINEL", addrs)
	if err != nil {
		return app.RedisSentinel{}, err
	}
	return app.RedisSentinel{Master: master, Addrs: list}, nil
}

func parseDuration(name, v string, min time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	if d < min {
		return 0, fmt.Errorf("%s=%q: must be at least %s", name, v, min)
	}
	return d, nil
}

// checkStores refuses a half-embedded setup. Instances that share MySQL but each run their
// own embedded Redis share neither the lock nor the order-id counter: the guard excludes
// nothing across them and two of them can hand out the same order id. It refuses two Redis
// settings too.
func (c config) checkStores() error {
	const why = "instances would share one store and not the other (no common lock, repeated order ids); set both or neither"
	sentinel := c.redisSentinel.Master != ""
	switch {
	case c.redisAddr != "" && sentinel:
		return errors.New("SECKILL_REDIS_ADDR and SECKILL_REDIS_SENTINEL are both set: set one (a plain Redis, or the primary Sentinel watches)")
	case c.mysqlDSN != "" && c.redisAddr == "" && !sentinel:
		return fmt.Errorf("SECKILL_REDIS_ADDR is not set (nor SECKILL_REDIS_SENTINEL) but SECKILL_MYSQL_DSN is: %s", why)
	case c.redisAddr != "" && c.mysqlDSN == "":
		return fmt.Errorf("SECKILL_MYSQL_DSN is not set but SECKILL_REDIS_ADDR is: %s", why)
	case sentinel && c.mysqlDSN == "":
		return fmt.Errorf("SECKILL_MYSQL_DSN is not set but SECKILL_REDIS_SENTINEL is: %s", why)
	}
	return nil
}

// checkDataDir refuses a SECKILL_DATA_DIR of the embedded database that is no directory, or
// one that no file can be created in: SQLite would report either as "unable to open database
// file: out of memory (14)".
func (c config) checkDataDir() error {
	if c.dataDir == "" || c.mysqlDSN != "" {
		return nil
	}
	fi, err := os.Stat(c.dataDir)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		return fmt.Errorf("SECKILL_DATA_DIR=%q: %w", c.dataDir, err)
	}
	// Permissions alone do not tell (root ignores them; a read-only mount does not show in
	// them): try it.
	f, err := os.CreateTemp(c.dataDir, ".seckill-write-check-*")
	if err != nil {
		return fmt.Errorf("SECKILL_DATA_DIR=%q: cannot create a file in it: %w", c.dataDir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// openStores opens the stores cfg names, saying so loudly when they are the embedded ones.
func openStores(ctx context.Context, log *slog.Logger, cfg config) (*app.Stores, error) {
	st, err := app.OpenStores(ctx, app.StoresConfig{MySQLDSN: cfg.mysqlDSN, RedisAddr: cfg.redisAddr, RedisSentinel: cfg.redisSentinel, DataDir: cfg.dataDir,
		RedLockAddrs: cfg.redlockAddrs, ZooKeeperAddrs: cfg.zkAddrs, EtcdEndpoints: cfg.etcdAddrs})
	if err != nil {
		return nil, err
	}
	if st.Embedded {
		log.Warn("running on EMBEDDED stores: data lives in this process and is lost when it exits; "+
			"set SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDR to use MySQL/MariaDB and Redis", "stores", st.String())
	}
	return st, nil
}

// appConfig is what an instance is built from.
func (c config) appConfig() app.Config {
	return app.Config{
		AdminToken: c.adminToken,
		Lock:       c.lock,
		Fencing:    c.fencing,
		Order: order.Config{LockTTL: c.lockTTL, Timeout: c.orderTimeout, MaxInflight: c.maxInflight,
			ProcessingDelay: c.orderDelay},
		OrderMode:      c.orderMode,
		Async:          c.stream,
		FenceRetention: c.fenceRetention,
	}
}

// newInstance wires an instance with app.New; a lock backend that does not answer is reported
// with the setting that names it and how to start one for development.
func newInstance(ctx context.Context, log *slog.Logger, cfg app.Config, st *app.Stores) (*app.Instance, error) {
	inst, err := app.New(ctx, log, cfg, st)
	var be *app.LockBackendError
	if errors.As(err, &be) {
		hint := map[string]string{
			"redlock":   "SECKILL_REDLOCK_ADDRS (`scripts/services.sh up` starts five nodes on " + strings.Join(app.DefaultRedLockAddrs, ",") + ")",
			"zookeeper": "SECKILL_ZOOKEEPER_ADDRS (`scripts/services.sh up zookeeper` starts one on 127.0.0.1:2181)",
			"etcd":      "SECKILL_ETCD_ENDPOINTS (`scripts/services.sh up etcd` starts one on 127.0.0.1:2379)",
		}[be.Kind]
		if be.NodeTimeout > 0 {
			return nil, fmt.Errorf("SECKILL_LOCK=%s: %w; if the nodes are up, give them longer with a longer %s; else check %s",
				be.Kind, err, orderTimeoutSetting(cfg.Order), hint)
		}
		return nil, fmt.Errorf("SECKILL_LOCK=%s: %w; check %s", be.Kind, err, hint)
	}
	return inst, err
}

// orderTimeoutSetting names the setting of o's order deadline, and says where an unset one's
// value comes from.
func orderTimeoutSetting(o order.Config) string {
	if o.Timeout > 0 {
		return "SECKILL_ORDER_TIMEOUT (" + o.Timeout.String() + ")"
	}
	return fmt.Sprintf("SECKILL_ORDER_TIMEOUT (unset: %s, the shorter of %s and half SECKILL_LOCK_TTL)", o.EffectiveTimeout(), order.DefaultTimeout)
}
