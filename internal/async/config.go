package async

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"time"
)

// Defaults of Config.
const (
	DefaultGroup = "seckill-writers"
	DefaultBatch = 200
	// DefaultLinger delays only the write of a short batch, never an admission's answer (the
	// 202 comes from Redis before a writer reads the order). It buys fewer, fuller transactions
	// when orders trickle in: on a 2 vCPU AMD EPYC (2026-11-27, two instances behind nginx, open
	// loops at 300, 1,000 and 3,000 admissions a second, four runs each, alternating with 2 ms,
	// the default before) MariaDB's CPU per order fell from 840–990 to 310–390 µs, 306–344 to
	// 119–131 µs and 82–90 to 42–50 µs, and the machine's busy share at 300/s from 48–54 % to
	// 29–37 %; the admissions' p99 stayed within the spread (docs/loadtest.md, "The writer's
	// linger"). At 2 ms a trickle made a batch per order: a transaction and two scripts each.
	DefaultLinger      = 20 * time.Millisecond
	DefaultClaimIdle   = 5 * time.Second
	DefaultMaxAttempts = 5
	DefaultDBDownBound = 10 * time.Second
	DefaultTimeout     = 2 * time.Second
	DefaultRetention   = time.Hour
)

// MaxBatch bounds Config.Batch. A batch is one INSERT of six arguments per order and one read
// of two per order: 5,000 keeps that within SQLite's 32,766 bound arguments per statement and
// far within MySQL's default max_allowed_packet, where a larger batch would fail every write
// until its orders were dead-lettered.
const MaxBatch = 5000

// DefaultMaxInflight is the default bound on an instance's admissions in progress. An
// admission holds no database connection and takes about a millisecond, so the bound is not
// what limits throughput (1,024 at a time is hundreds of thousands a second); it bounds the
// goroutines and memory a hung Redis can gather before the admissions time out.
const DefaultMaxInflight = 1024

// DefaultAdmitBatch is the default of Config.AdmitBatch, and MaxAdmitBatch its bound. A call
// blocks Redis, for every voucher, while it runs: on a 2 vCPU AMD EPYC (2026-11-27, INFO
// commandstats of a redis-server of its own, 20 calls each) a call of 1 order took 36 µs, of 8
// 72 µs (9 µs an order), of 128 1.3 ms and of 1,024 9.4 ms (9–10 µs an order). The share of
// the call's own cost is gone by 8 orders; 32 keeps a call near a third of a millisecond.
const (
	DefaultAdmitBatch = 32
	MaxAdmitBatch     = 256
)

// Config tunes the asynchronous mode. Zero fields take the defaults above.
type Config struct {
	// Group is the consumer group of the writers: one per service.
	Group string
	// Consumer names this instance's writer in the group; it must differ between instances
	// (two writers under one name would take each other's pending entries for their own).
	// Empty: hostname-pid-random.
	Consumer string
	// Batch is the most orders one database transaction writes, at most MaxBatch.
	Batch int
	// Linger is how long the writer waits for a batch to fill once it has fewer than Batch.
	Linger time.Duration
	// ClaimIdle is how long an entry may stay delivered and unacknowledged before another
	// writer claims it (XAUTOCLAIM): the writer that read it crashed or hangs. A batch is
	// given up (rolled back, and read again) before its entries have idled that long: nine
	// tenths of it from their delivery (the sending of the read that delivered them), the
	// linger included, or half of it + 2 s when that is shorter (from 5 s on). It must exceed
	// the time a batch takes to commit.
	ClaimIdle time.Duration
	// MaxAttempts is how often an order may be refused by the database (not: the database
	// unreachable, nor a failure that says nothing against the order, database.IsTransient)
	// before it is dead-lettered and its reservation released.
	MaxAttempts int
	// DBDownBound is how long the writer may fail to reach the database before Ready fails.
	DBDownBound time.Duration
	// Timeout bounds each admission (its Redis calls, and a load from the database).
	Timeout time.Duration
	// MaxInflight bounds the admissions in progress at once; the next one is refused at once
	// with order.ErrOverloaded, so that a Redis that hangs holds at most this many requests
	// (each until Timeout) instead of every request that arrives meanwhile. Zero takes
	// DefaultMaxInflight.
	MaxInflight int
	// AdmitBatch is the most admissions of one voucher one call of the admission script
	// decides: those that arrived at this instance while its previous call was under way
	// (admit.go). 1 sends every admission in a call of its own. Zero takes DefaultAdmitBatch;
	// at most MaxAdmitBatch.
	AdmitBatch int
	// Retention is how long after a sale's end a voucher's Redis keys are kept: its users,
	// statuses, dead letters and consumer group. Past it, once no order of the voucher is left
	// in its stream, a writer copies its dead letters to the database (async_failed_orders),
	// deletes those keys and takes the voucher out of the registry, so that a status lookup and
	// the writers' discovery ask Redis about the vouchers of recent sales only, not of every
	// sale ever. The sale hash stays, marked retired. Zero takes DefaultRetention; it is never
	// shorter than a minute, the time a finished voucher's stream is still read.
	Retention time.Duration
	// Now is the instance's clock: of the retention, of the vouchers loaded at start and of
	// the back-off of stranded ones; nil means time.Now. The sale window is not decided on it:
	// the admission script reads Redis's clock, one for every instance.
	Now func() time.Time
}

// MaxLinger is the longest Linger that leaves a batch of a writer with ClaimIdle claimIdle the
// time to commit: a quarter of the batch's deadline, as the wait for its first entries may
// take another quarter. A linger as long as the deadline makes every batch that waits for
// more entries miss it: it is rolled back, and its entries are claimed again seconds later.
func MaxLinger(claimIdle time.Duration) time.Duration { return batchSpan(claimIdle) / 4 }

// BatchDeadline is how long after its first entry was delivered a batch of a writer with
// ClaimIdle claimIdle (DefaultClaimIdle if zero) must have committed: a statement of it that
// waits for a row lock ends by then.
func BatchDeadline(claimIdle time.Duration) time.Duration {
	if claimIdle <= 0 {
		claimIdle = DefaultClaimIdle
	}
	return batchSpan(claimIdle)
}

// stopSlack is what Writer.Stop allows past a batch's deadline: a batch that failed at its
// deadline pings the database (pingTimeout) and may record a dead letter there
// (redisCallTimeout) before its loop ends; then Stop asks Redis, per voucher, whether its
// consumer may leave the group (redisCallTimeout).
const stopSlack = pingTimeout + 2*redisCallTimeout

// StopTimeout is how long Writer.Stop of a writer with ClaimIdle claimIdle (DefaultClaimIdle
// if zero) may take to let a batch in progress commit and acknowledge: the batch's deadline
// (BatchDeadline), which counts from before the Stop, plus what a batch that failed still does
// past it and the leaving of the group. 9.5 s by default. A stop bounded by less may give up
// on a batch that would have committed: its entries stay pending, claimed later.
func StopTimeout(claimIdle time.Duration) time.Duration {
	return BatchDeadline(claimIdle) + stopSlack
}

func (c Config) withDefaults() Config {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Consumer == "" {
		c.Consumer = ConsumerName()
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	c.Batch = min(c.Batch, MaxBatch)
	if c.Linger < 0 {
		c.Linger = 0
	} else if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.ClaimIdle <= 0 {
		c.ClaimIdle = DefaultClaimIdle
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.DBDownBound <= 0 {
		c.DBDownBound = DefaultDBDownBound
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.AdmitBatch <= 0 {
		c.AdmitBatch = DefaultAdmitBatch
	}
	c.AdmitBatch = min(c.AdmitBatch, MaxAdmitBatch)
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	c.Retention = max(c.Retention, finishedAfter)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ConsumerName is a consumer name unique to this process: hostname, pid and 6 random bytes,
// so that two instances never share one, not even two containers that both run as pid 1.
func ConsumerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on the platforms Go supports
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}
