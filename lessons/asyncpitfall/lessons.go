package asyncpitfall

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A1. The admission script takes the unit first and checks afterwards.
var decrementFirstScript = redis.NewScript(`
local left = redis.call('HINCRBY', KEYS[1], 'stock', -1)
if left < 0 then return 4 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 3 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('XADD', KEYS[4], '*', 'order', ARGV[2], 'user', ARGV[1], 'voucher', ARGV[3], 'at', ARGV[4])
return 0`)

func decrementFirst() Lesson {
	users := []int64{1, 1, 2, 3, 4}
	storm := func(ctx context.Context, e *env, admit func(int64) (string, error)) error {
		if err := e.open(ctx, 2); err != nil {
			return err
		}
		for _, u := range users {
			if _, err := admit(u); err != nil {
				return err
			}
		}
		return nil
	}
	return Lesson{
		ID:    "A1",
		Title: "Decrement before the duplicate check: negative stock, units lost to retries",
		Bug: "The admission script decrements the stock first (DECR / HINCRBY -1) and only then asks whether " +
			"the stock was there and whether the user already ordered. A user's retry takes a unit it then " +
			"refuses, and every request after the sell-out drives the counter further below zero.",
		Fix: "scripts/lua/async_admit.lua checks the sale window, then the user's earlier order, then that the " +
			"stock is above zero, and only then decrements: a refused request changes nothing.",
		wrong: func(ctx context.Context, e *env) error {
			return storm(ctx, e, func(u int64) (string, error) {
				e.nextID++
				code, err := decrementFirstScript.Run(ctx, e.rdb, []string{e.k.sale, e.k.users, e.k.orders, e.k.stream},
					u, e.nextID, voucherID, 1).Int64()
				if err != nil {
					return "", err
				}
				return e.answer(u, code)
			})
		},
		right: func(ctx context.Context, e *env) error {
			return storm(ctx, e, func(u int64) (string, error) { return e.admit(ctx, u) })
		},
		check: func(r Run) string {
			switch {
			case r.RedisStock < 0:
				return fmt.Sprintf("stock %d in Redis; %d of %d units sold", r.RedisStock, r.Admitted, r.Initial)
			case r.Admitted+r.RedisStock != r.Initial:
				return fmt.Sprintf("admitted %d + stock %d ≠ %d", r.Admitted, r.RedisStock, r.Initial)
			case r.Admitted < r.Wanted:
				return fmt.Sprintf("%d of the %d units the users asked for admitted", r.Admitted, r.Wanted)
			}
			return ""
		},
	}
}

// A2. A write the database refuses is acknowledged and forgotten; its reservation stays taken.
func noCompensation() Lesson {
	// User 2 already holds an order of this voucher in the database (placed before the sale
	// moved to the asynchronous mode), which Redis did not know: the database refuses the write.
	setup := func(ctx context.Context, e *env) ([]entry, error) {
		if err := e.open(ctx, 2); err != nil {
			return nil, err
		}
		e.db.users[2] = true
		e.say("the database already holds an order of user 2 (an earlier channel); Redis does not know it")
		for _, u := range []int64{1, 2} {
			if _, err := e.admit(ctx, u); err != nil {
				return nil, err
			}
		}
		return e.read(ctx, "writer-a", ">")
	}
	last := func(ctx context.Context, e *env) error {
		_, err := e.admit(ctx, 3)
		return err
	}
	return Lesson{
		ID:    "A2",
		Title: "A reservation without compensation: stock under-sold",
		Bug: "When the database refuses an order for good, the writer logs it and acknowledges the entry. " +
			"The unit the admission reserved in Redis is never given back and the user stays marked as " +
			"having ordered: the sale ends sold out in Redis with units left in the database.",
		Fix: "internal/async/writer.go dead-letters an order refused SECKILL_STREAM_MAX_ATTEMPTS times with " +
			"scripts/lua/async_dead.lua: in one step the entry moves to the dead-letter stream, the unit goes " +
			"back to the stock, the user is released and the order's status becomes failed.",
		wrong: func(ctx context.Context, e *env) error {
			es, err := setup(ctx, e)
			if err != nil {
				return err
			}
			for _, x := range es {
				if err := e.write("writer-a", x); err != nil {
					e.say("writer-a: logs the error and acknowledges the entry")
				}
				if err := e.ack(ctx, "writer-a", x); err != nil {
					return err
				}
			}
			return last(ctx, e)
		},
		right: func(ctx context.Context, e *env) error {
			es, err := setup(ctx, e)
			if err != nil {
				return err
			}
			for _, x := range es {
				if err := e.write("writer-a", x); err != nil {
					if _, err := e.deadLetter(ctx, "writer-a", x, "refused by the database"); err != nil {
						return err
					}
					continue
				}
				if err := e.ack(ctx, "writer-a", x); err != nil {
					return err
				}
			}
			if err := last(ctx, e); err != nil {
				return err
			}
			return e.writeNew(ctx, "writer-a")
		},
		check: func(r Run) string {
			if r.RedisStock+r.Rows+r.Queued < r.Initial {
				return fmt.Sprintf("%d of %d units sold, Redis stock %d: %d unit(s) reserved for an order that will never exist",
					r.Rows, r.Initial, r.RedisStock, r.Initial-r.Rows-r.RedisStock-r.Queued)
			}
			return unwritten(r)
		},
	}
}

// A3. The writer acknowledges an entry before the database committed it.
func ackBeforeCommit() Lesson {
	setup := func(ctx context.Context, e *env) ([]entry, error) {
		if err := e.open(ctx, 5); err != nil {
			return nil, err
		}
		for _, u := range []int64{1, 2} {
			if _, err := e.admit(ctx, u); err != nil {
				return nil, err
			}
		}
		return e.read(ctx, "writer-a", ">")
	}
	recover := func(ctx context.Context, e *env) error {
		e.say("writer-a crashes (kill -9) before its INSERT")
		es, err := e.claim(ctx, "writer-b")
		if err != nil {
			return err
		}
		return e.writeAll(ctx, "writer-b", es)
	}
	return Lesson{
		ID:    "A3",
		Title: "ACK before commit: admitted orders lost",
		Bug: "The writer reads a batch, acknowledges it at once (\"we have it\") and then writes it. A crash " +
			"between the two loses the batch: Redis has forgotten it, the database never saw it, and the " +
			"clients hold a 202 for orders that will never exist.",
		Fix: "internal/async/writer.go acknowledges (scripts/lua/async_ack.lua) only after the database " +
			"committed the batch; an entry read and not yet written stays pending, and another writer " +
			"claims it (XAUTOCLAIM) once it has idled SECKILL_STREAM_CLAIM_IDLE.",
		wrong: func(ctx context.Context, e *env) error {
			es, err := setup(ctx, e)
			if err != nil {
				return err
			}
			if err := e.ack(ctx, "writer-a", es...); err != nil {
				return err
			}
			return recover(ctx, e)
		},
		right: func(ctx context.Context, e *env) error {
			if _, err := setup(ctx, e); err != nil {
				return err
			}
			return recover(ctx, e)
		},
		check: func(r Run) string {
			if r.Lost > 0 {
				return fmt.Sprintf("%d of %d admitted orders lost: not in the database, not pending", r.Lost, r.Admitted)
			}
			return unwritten(r)
		},
	}
}

// A4. After a restart the writer reads only new entries.
func onlyNew() Lesson {
	setup := func(ctx context.Context, e *env) error {
		if err := e.open(ctx, 5); err != nil {
			return err
		}
		for _, u := range []int64{1, 2} {
			if _, err := e.admit(ctx, u); err != nil {
				return err
			}
		}
		if _, err := e.read(ctx, "writer-a", ">"); err != nil {
			return err
		}
		e.say("writer-a crashes before its INSERT, and restarts under the same name")
		return nil
	}
	return Lesson{
		ID:    "A4",
		Title: "Reading only `>`: a crashed writer's orders pending forever",
		Bug: "The writer only ever asks for new entries (XREADGROUP ... >). The entries it had read when it " +
			"crashed stay in the group's pending list, delivered to a consumer that no longer exists; no " +
			"read with > returns them again, so those orders stay pending for ever.",
		Fix: "internal/async/writer.go claims every entry that has idled longer than SECKILL_STREAM_CLAIM_IDLE " +
			"(XAUTOCLAIM, its own included) besides reading new ones, so a crashed writer's orders are " +
			"written by whichever writer looks next.",
		wrong: func(ctx context.Context, e *env) error {
			if err := setup(ctx, e); err != nil {
				return err
			}
			for range 3 {
				es, err := e.read(ctx, "writer-a", ">")
				if err != nil {
					return err
				}
				if err := e.writeAll(ctx, "writer-a", es); err != nil {
					return err
				}
			}
			return nil
		},
		right: func(ctx context.Context, e *env) error {
			if err := setup(ctx, e); err != nil {
				return err
			}
			es, err := e.claim(ctx, "writer-a")
			if err != nil {
				return err
			}
			if err := e.writeAll(ctx, "writer-a", es); err != nil {
				return err
			}
			return e.writeNew(ctx, "writer-a")
		},
		check: func(r Run) string {
			if r.Rows < r.Admitted {
				return fmt.Sprintf("%d of %d admitted orders written; %d still pending after three reads", r.Rows, r.Admitted, r.Pending)
			}
			return unwritten(r)
		},
	}
}

// A5. Every instance's writer uses the same consumer name.
func sharedName() Lesson {
	run := func(ctx context.Context, e *env, nameA, nameB string) error {
		if err := e.open(ctx, 2); err != nil {
			return err
		}
		for _, u := range []int64{1, 2} {
			if _, err := e.admit(ctx, u); err != nil {
				return err
			}
		}
		e.as = "A"
		mine, err := e.read(ctx, nameA, ">")
		if err != nil {
			return err
		}
		e.say("writes its batch; its commit is slow")
		e.as = "B"
		e.say("starts and, as a careful writer does, first reads its own pending entries")
		theirs, err := e.read(ctx, nameB, "0")
		if err != nil {
			return err
		}
		for _, x := range theirs {
			if err := e.write(nameB, x); err != nil {
				return err
			}
		}
		// A's commit comes back refused: the rows are there already (B wrote them). A treats a
		// refusal as the order's failure and gives it up, before B acknowledges.
		e.as = "A"
		for _, x := range mine {
			if err := e.write(nameA, x); err != nil {
				if _, err := e.deadLetter(ctx, nameA, x, "refused by the database"); err != nil {
					return err
				}
				continue
			}
			if err := e.ack(ctx, nameA, x); err != nil {
				return err
			}
		}
		if len(theirs) > 0 {
			e.as = "B"
			if err := e.ack(ctx, nameB, theirs...); err != nil {
				return err
			}
		}
		e.as = ""
		_, err = e.admit(ctx, 3)
		return err
	}
	return Lesson{
		ID:    "A5",
		Title: "One consumer name for every instance: another instance's orders taken, units sold twice",
		Bug: "Every instance's writer joins the group as \"writer\". The pending list then cannot tell whose " +
			"entries are whose: an instance that starts and reads \"its own\" pending entries takes those " +
			"another live instance is writing, both write them, and the loser's error handling acts on " +
			"orders that exist — here, giving their units back for sale.",
		Fix: "internal/async.ConsumerName gives each process its own name (host, pid and random bytes); " +
			"scripts/lua/async_dead.lua dead-letters an entry only for the consumer it is pending with; and " +
			"the writer (internal/async/writer.go) counts an order whose row already exists as written, " +
			"never as a failure.",
		wrong: func(ctx context.Context, e *env) error { return run(ctx, e, "writer", "writer") },
		right: func(ctx context.Context, e *env) error { return run(ctx, e, "writer-a-7f3c", "writer-b-91d2") },
		check: func(r Run) string {
			// A unit is sold, waits in the stream with an admitted order, or is still offered.
			if over := r.RedisStock + r.Queued + r.Rows - r.Initial; over > 0 {
				return fmt.Sprintf("Redis offers %d unit(s) and holds %d admitted order(s) in the stream with %d of %d sold: %d unit(s) sold twice",
					r.RedisStock, r.Queued, r.Rows, r.Initial, over)
			}
			return unwritten(r)
		},
	}
}

// A6. The instance answers 503 while its call waits in a hung Redis.
func answerBeforeOutcome() Lesson {
	run := func(ctx context.Context, e *env, withDeadline bool) error {
		if err := e.open(ctx, 2); err != nil {
			return err
		}
		if _, err := e.admit(ctx, 1); err != nil {
			return err
		}
		deadline := ""
		if withDeadline {
			// The order's deadline on Redis's clock: here the moment the call is sent, so that the
			// lesson need not wait out SECKILL_ORDER_TIMEOUT's two seconds.
			now, err := e.rdb.Time(ctx).Result()
			if err != nil {
				return err
			}
			deadline = strconv.FormatInt(now.UnixMilli(), 10)
		}
		call := e.hungCall(2, deadline)
		if withDeadline {
			e.say("user 2 orders: the instance sends order %d's call, its deadline with it (in this lesson the moment it is sent, not two seconds later); Redis hangs (SIGSTOP) with the call in its socket", call[2])
		} else {
			e.say("user 2 orders: the instance sends order %d's call; Redis hangs (SIGSTOP) with the call in its socket", call[2])
		}
		e.say("the call's I/O timeout; the settling call (async_settle.lua) cannot reach Redis either")
		if withDeadline {
			e.say("the instance waits for the order's deadline and settles again: no Redis → user 2 answered 503 unavailable, nothing placed")
		} else {
			e.say("user 2 answered 503 unavailable: nothing placed")
		}
		if err := e.resume(ctx, call); err != nil {
			return err
		}
		if err := e.writeNew(ctx, "writer-a"); err != nil {
			return err
		}
		if _, err := e.admit(ctx, 3); err != nil {
			return err
		}
		return e.writeNew(ctx, "writer-a")
	}
	return Lesson{
		ID:    "A6",
		Title: "An answer before the outcome: 503 for an order a hung Redis admits later",
		Bug: "Redis hangs (a stall, SIGSTOP, a partition) with an admission call in its socket. The instance " +
			"gives up on the call, cannot settle it either (the settling call waits behind it), and answers " +
			"503, \"nothing was placed\". When Redis resumes it runs the call: the order is admitted and " +
			"written, its unit sold to a user who was told the order failed and went elsewhere.",
		Fix: "internal/async/admit.go sends each order's deadline with it, on Redis's clock (estimated from " +
			"the answers' time), and scripts/lua/async_admit.lua admits nothing of an order whose deadline has " +
			"passed; an admission whose settling call failed waits for its deadline and settles again " +
			"(internal/async/service.go), so from then on its 503 is final.",
		wrong: func(ctx context.Context, e *env) error { return run(ctx, e, false) },
		right: func(ctx context.Context, e *env) error { return run(ctx, e, true) },
		check: func(r Run) string {
			if sold := r.Initial - r.RedisStock; sold > r.Admitted {
				return fmt.Sprintf("%d unit(s) sold, %d order(s) answered 202: %d order(s) admitted whose users were told 503",
					sold, r.Admitted, sold-r.Admitted)
			}
			return unwritten(r)
		},
	}
}

// unwritten is the liveness half of the verdict of the lessons whose writer runs to the end:
// every unit the users asked for is a row, and no written order's entry is left in the stream.
func unwritten(r Run) string {
	switch {
	case r.Rows < r.Wanted:
		return fmt.Sprintf("%d of the %d units the users asked for written", r.Rows, r.Wanted)
	case r.Stream > r.Queued:
		return fmt.Sprintf("%d written order(s) still in the stream", r.Stream-r.Queued)
	}
	return ""
}
