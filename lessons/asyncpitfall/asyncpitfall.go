// Package asyncpitfall is the asynchronous order path's pitfalls as executable lessons: five
// bugs found in public clones of the Redis-admission + stream-writer design (docs/async.md),
// and one this repository had (A6),
// each run wrong and then right on the same scenario, step by step in a fixed order (no
// goroutines, no sleeps: the "crash" is a step that is not taken), with the timeline and the
// books. The right variants run this repository's own scripts (scripts/lua/async_admit.lua,
// async_ack.lua, async_dead.lua, async_settle.lua) and take the writer's steps in its order
// (internal/async/writer.go, not imported: it depends on internal/order, which lessons may
// not import; its own tests hold it to that order).
//
// The database is a small in-memory table with the constraints the real one has (order id as
// primary key, one order per user and voucher, stock that may not go below zero), so that the
// lessons run without MySQL; Redis is real (miniredis in `go test`, redis-server in
// `make test-integration`).
package asyncpitfall

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

// Lesson is one pitfall: what the wrong code does, what the fix does, and the two runs.
type Lesson struct {
	ID    string
	Title string
	Bug   string
	Fix   string
	wrong func(context.Context, *env) error
	right func(context.Context, *env) error
	// check names the failure a run's books show, or returns "".
	check func(Run) string
}

// Run is one variant's run: its timeline, its books and whether the lesson's failure happened.
type Run struct {
	Timeline []string
	// Books: the voucher's initial stock, the stock Redis still offers, the orders the clients
	// were told were admitted (202), the rows in the database, and admitted orders neither
	// written nor waiting in the stream (lost).
	Initial, RedisStock, Admitted, Rows, Lost, Pending int64
	// Queued is the admitted orders still in the stream (read or not) that are not rows yet:
	// each holds a unit Redis no longer offers.
	Queued int64
	// Stream is the entries left in the stream: once a writer acknowledged an order
	// (async_ack.lua deletes its entry), only the queued ones.
	Stream int64
	// Wanted is the units the run's users asked for: one per user who ordered, up to the
	// stock. A right variant sells them all; one that refused everyone would keep every other
	// book right.
	Wanted int64
	// Broken is the lesson's failure, in words; empty when the books are right.
	Broken string
}

// Result is both runs of a lesson.
type Result struct {
	Lesson       Lesson
	Wrong, Right Run
}

// Lessons returns the lessons in order.
func Lessons() []Lesson {
	return []Lesson{decrementFirst(), noCompensation(), ackBeforeCommit(), onlyNew(), sharedName(), answerBeforeOutcome()}
}

// RunAll runs every lesson on rdb, under keys that start with prefix (unique per run).
func RunAll(ctx context.Context, rdb *redis.Client, prefix string) ([]Result, error) {
	var out []Result
	for i, l := range Lessons() {
		r := Result{Lesson: l}
		for _, v := range []struct {
			run  func(context.Context, *env) error
			into *Run
			name string
		}{{l.wrong, &r.Wrong, "wrong"}, {l.right, &r.Right, "right"}} {
			e := newEnv(rdb, fmt.Sprintf("%s:%d:%s", prefix, i, v.name))
			if err := v.run(ctx, e); err != nil {
				return nil, fmt.Errorf("%s %s: %w", l.ID, v.name, err)
			}
			run, err := e.books(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", l.ID, v.name, err)
			}
			run.Broken = l.check(run)
			*v.into = run
		}
		out = append(out, r)
	}
	return out, nil
}

// The scripts of the right variants are the service's own.
var (
	admitScript  = redis.NewScript(lua.AsyncAdmit)
	ackScript    = redis.NewScript(lua.AsyncAck)
	deadScript   = redis.NewScript(lua.AsyncDead)
	settleScript = redis.NewScript(lua.AsyncSettle)
)

const (
	voucherID = 1
	group     = "writers"
)

// keys of the lesson's voucher, in one hash slot like internal/async's.
type keys struct{ sale, users, orders, stream, dead, attempts string }

// env is one run: its Redis keys, its database table and its timeline.
type env struct {
	rdb      *redis.Client
	k        keys
	db       *table
	timeline []string
	admitted int64
	ids      []int64 // the orders answered 202, in order
	initial  int64
	nextID   int64
	// as names the instance acting, when two share a consumer name (lesson A5).
	as string
	// asked is every user who ordered, answered 202 or not.
	asked map[int64]bool
}

func newEnv(rdb *redis.Client, prefix string) *env {
	p := prefix + ":{voucher:1}:"
	return &env{rdb: rdb, k: keys{sale: p + "sale", users: p + "users", orders: p + "orders", stream: p + "stream",
		dead: p + "dead", attempts: p + "attempts"}, nextID: 100, asked: map[int64]bool{}}
}

func (e *env) say(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if e.as != "" {
		line = "[instance " + e.as + "] " + line
	}
	e.timeline = append(e.timeline, line)
}

// open puts a voucher with stock units on sale in Redis and in the database, and creates the
// writers' consumer group.
func (e *env) open(ctx context.Context, stock int64) error {
	e.initial = stock
	e.db = newTable(stock)
	if err := e.rdb.HSet(ctx, e.k.sale, "stock", stock, "begin", 0, "end", int64(1)<<50).Err(); err != nil {
		return err
	}
	if err := e.rdb.XGroupCreateMkStream(ctx, e.k.stream, group, "0").Err(); err != nil {
		return err
	}
	e.say("sale opens: %d units, in Redis and in the database", stock)
	return nil
}

// admit runs the service's admission script for user and tells what the client was answered.
func (e *env) admit(ctx context.Context, user int64) (string, error) {
	e.nextID++
	res, err := admitScript.Run(ctx, e.rdb, []string{e.k.sale, e.k.users, e.k.orders, e.k.stream},
		voucherID, user, e.nextID, "").Slice() // "": no deadline (the lesson's calls are never late)
	if err != nil {
		return "", err
	}
	return e.answer(user, res[0].(int64))
}

func (e *env) answer(user, code int64) (string, error) {
	e.asked[user] = true
	var a string
	switch code {
	case 0:
		e.admitted++
		e.ids = append(e.ids, e.nextID)
		a = fmt.Sprintf("202 pending (order %d)", e.nextID)
	case 3:
		a = "409 already_ordered"
	case 4:
		a = "409 sold_out"
	default:
		return "", fmt.Errorf("admission answered %d", code)
	}
	stock, _ := e.rdb.HGet(context.Background(), e.k.sale, "stock").Int64()
	e.say("user %d orders → %s; Redis stock %d", user, a, stock)
	return a, nil
}

// hungCall is user's admission call sent while Redis hangs: it waits in Redis's socket, with
// deadline (on Redis's clock, "" for none), until resume runs it. Its client is answered
// meanwhile, by the lesson.
func (e *env) hungCall(user int64, deadline string) []any {
	e.nextID++
	e.asked[user] = true
	return []any{voucherID, user, e.nextID, deadline}
}

// resume runs, as a Redis that resumes does, a call that waited in its socket, then the settling
// call the instance sent after it, and tells what each did.
func (e *env) resume(ctx context.Context, call []any) error {
	res, err := admitScript.Run(ctx, e.rdb, []string{e.k.sale, e.k.users, e.k.orders, e.k.stream}, call...).Slice()
	if err != nil {
		return err
	}
	user, id := call[1], call[2]
	stock, _ := e.rdb.HGet(ctx, e.k.sale, "stock").Int64()
	switch code := res[0].(int64); code {
	case 0:
		e.say("Redis resumes and runs order %d's call: admitted, Redis stock %d; user %d was told 503", id, stock, user)
	case 6:
		e.say("Redis resumes and runs order %d's call: its deadline has passed on Redis's clock → refused, nothing taken (Redis stock %d)", id, stock)
	default:
		e.say("Redis resumes and runs order %d's call → %d (Redis stock %d)", id, code, stock)
	}
	n, err := settleScript.Run(ctx, e.rdb, []string{e.k.users, e.k.orders}, user, id).Int()
	if err != nil {
		return err
	}
	if n == 1 {
		e.say("then the settling call of order %d: admitted (to an instance that answered long ago)", id)
	} else {
		e.say("then the settling call of order %d: not admitted, its id voided", id)
	}
	return nil
}

// entry is one stream entry as a writer sees it.
type entry struct {
	streamID      string
	order, userID int64
}

func entries(msgs []redis.XMessage) []entry {
	out := make([]entry, 0, len(msgs))
	for _, m := range msgs {
		o, _ := strconv.ParseInt(fmt.Sprint(m.Values["order"]), 10, 64)
		u, _ := strconv.ParseInt(fmt.Sprint(m.Values["user"]), 10, 64)
		out = append(out, entry{streamID: m.ID, order: o, userID: u})
	}
	return out
}

// read is XREADGROUP for consumer from id (">" new entries, "0" the consumer's own pending).
func (e *env) read(ctx context.Context, consumer, id string) ([]entry, error) {
	res, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
		Streams: []string{e.k.stream, id}, Count: 100, Block: -1}).Result()
	if errors.Is(err, redis.Nil) {
		e.say("%s: XREADGROUP %s → nothing", consumer, id)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	es := entries(res[0].Messages)
	e.say("%s: XREADGROUP %s → %s", consumer, id, describe(es))
	return es, nil
}

// claim is XAUTOCLAIM for consumer of every pending entry (min idle 0 here; the service waits
// SECKILL_STREAM_CLAIM_IDLE, 5 s, so that it takes only what a crashed or hung writer left).
func (e *env) claim(ctx context.Context, consumer string) ([]entry, error) {
	msgs, _, err := e.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: e.k.stream, Group: group,
		Consumer: consumer, Start: "0-0", Count: 100}).Result()
	if err != nil {
		return nil, err
	}
	es := entries(msgs)
	e.say("%s: XAUTOCLAIM → %s", consumer, describe(es))
	return es, nil
}

// ack acknowledges entries with the service's script (scripts/lua/async_ack.lua): XACK, the entries deleted
// and the orders' pending status forgotten, in one step. Whether that happens before or after
// the commit is the lesson's.
func (e *env) ack(ctx context.Context, consumer string, es ...entry) error {
	if len(es) == 0 {
		return nil
	}
	args := []any{group}
	for _, x := range es {
		args = append(args, x.streamID, x.order)
	}
	n, err := ackScript.Run(ctx, e.rdb, []string{e.k.stream, e.k.orders, e.k.attempts}, args...).Int()
	if err != nil {
		return err
	}
	e.say("%s: async_ack.lua (XACK, then delete) %s → %d acknowledged", consumer, describe(es), n)
	return nil
}

// write commits one order to the database table.
func (e *env) write(consumer string, x entry) error {
	err := e.db.insert(x.order, x.userID)
	if err != nil {
		e.say("%s: INSERT order %d (user %d) → refused: %v", consumer, x.order, x.userID, err)
		return err
	}
	e.say("%s: INSERT order %d (user %d), stock - 1 → committed", consumer, x.order, x.userID)
	return nil
}

// writeAll writes each entry and acknowledges it after its commit: the writer's order of
// steps in internal/async/writer.go.
func (e *env) writeAll(ctx context.Context, consumer string, es []entry) error {
	for _, x := range es {
		if err := e.write(consumer, x); err != nil {
			return err
		}
		if err := e.ack(ctx, consumer, x); err != nil {
			return err
		}
	}
	return nil
}

// writeNew reads the new entries and writes them (writeAll).
func (e *env) writeNew(ctx context.Context, consumer string) error {
	es, err := e.read(ctx, consumer, ">")
	if err != nil {
		return err
	}
	return e.writeAll(ctx, consumer, es)
}

// deadLetter runs the service's dead-letter script: the entry leaves the stream for the
// dead-letter stream, its unit goes back to the stock and its user may order again; it does
// nothing when the entry is not pending for consumer.
func (e *env) deadLetter(ctx context.Context, consumer string, x entry, reason string) (bool, error) {
	// "free": the lessons' refusals are conflicts (the user has a row), whose unit is free.
	res, err := deadScript.Run(ctx, e.rdb, []string{e.k.stream, e.k.dead, e.k.sale, e.k.users, e.k.orders, e.k.attempts},
		group, consumer, x.streamID, x.order, x.userID, voucherID, 1, reason, "free").Result()
	if err != nil {
		return false, err
	}
	_, dead := res.(string) // 0 when the entry is not consumer's, else what became of the unit
	stock, _ := e.rdb.HGet(context.Background(), e.k.sale, "stock").Int64()
	if dead {
		e.say("%s: dead-letter order %d (%s): unit back, user %d released → Redis stock %d", consumer, x.order, reason, x.userID, stock)
	} else {
		e.say("%s: dead-letter order %d refused: the entry is not %s's", consumer, x.order, consumer)
	}
	return dead, nil
}

// books reads the run's end state.
func (e *env) books(ctx context.Context) (Run, error) {
	stock, err := e.rdb.HGet(ctx, e.k.sale, "stock").Int64()
	if err != nil {
		return Run{}, err
	}
	pending, err := e.rdb.XPending(ctx, e.k.stream, group).Result()
	if err != nil {
		return Run{}, err
	}
	dead, err := e.rdb.XRange(ctx, e.k.dead, "-", "+").Result()
	if err != nil {
		return Run{}, err
	}
	stream, err := e.rdb.XRange(ctx, e.k.stream, "-", "+").Result()
	if err != nil {
		return Run{}, err
	}
	inStream, deadLettered := map[int64]bool{}, map[int64]bool{}
	for _, x := range entries(stream) {
		inStream[x.order] = true
	}
	for _, x := range entries(dead) {
		deadLettered[x.order] = true
	}
	// Counted per order, so that an order that is both a row and a dead letter (lesson A5)
	// counts once. Queued: admitted, in the stream, not a row. Lost: admitted, not written, no
	// longer in the stream (acknowledged entries are deleted by scripts/lua/async_ack.lua:
	// what is left is pending or not yet read, so a writer will see it), and not
	// dead-lettered (so nobody was told it failed).
	var queued, lost int64
	for _, id := range e.ids {
		_, written := e.db.rows[id]
		switch {
		case written:
		case inStream[id]:
			queued++
		case !deadLettered[id]:
			lost++
		}
	}
	r := Run{Timeline: e.timeline, Initial: e.initial, RedisStock: stock, Admitted: e.admitted, Rows: int64(len(e.db.rows)),
		Lost: lost, Pending: pending.Count, Queued: queued, Stream: int64(len(stream)),
		Wanted: min(int64(len(e.asked)), e.initial)}
	return r, nil
}

func describe(es []entry) string {
	if len(es) == 0 {
		return "nothing"
	}
	s := ""
	for i, x := range es {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("order %d (user %d)", x.order, x.userID)
	}
	return s
}

// table is the orders table with the real one's constraints.
type table struct {
	stock int64
	rows  map[int64]int64 // order id -> user
	users map[int64]bool
}

var (
	errDuplicateUser = errors.New("duplicate entry for uk_user_voucher")
	errDuplicateID   = errors.New("duplicate entry for PRIMARY")
	errNoStock       = errors.New("stock would go below 0")
)

func newTable(stock int64) *table {
	return &table{stock: stock, rows: map[int64]int64{}, users: map[int64]bool{}}
}

func (t *table) insert(id, user int64) error {
	switch {
	case t.rows[id] != 0:
		return errDuplicateID
	case t.users[user]:
		return errDuplicateUser
	case t.stock <= 0:
		return errNoStock
	}
	t.rows[id], t.users[user] = user, true
	t.stock--
	return nil
}
