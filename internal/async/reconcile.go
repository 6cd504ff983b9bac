package async

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Book is one voucher's books across Redis and the database. Every unit of the initial stock
// is in exactly one place: left in Redis, reserved by an order waiting in the stream, or sold
// in a database row; so RedisStock + Pending + Orders = Initial, where Initial is the
// database's stock plus its rows (the writer takes both in one transaction).
type Book struct {
	VoucherID int64
	// Loaded is false when Redis has no sale hash for the voucher (nothing to compare).
	Loaded bool
	// Initial is the database's stock plus its order rows.
	Initial int64
	// DBStock is the database's stock: what is not in a row.
	DBStock int64
	// RedisStock is the units Redis may still admit.
	RedisStock int64
	// Pending is the orders in the stream that are not rows yet.
	Pending int64
	// Orders is the database's order rows of the voucher.
	Orders int64
	// Kept is the voucher's dead letters whose unit Redis kept (unit=kept): orders the
	// database's stock was short of. Each took off one unit that Redis counted and the
	// database never had, so it is not in the sum of Drift: it says how far the books were
	// apart before those dead letters brought them together. Zero after a Redis that
	// restarted empty, which lost its dead letters. Of a Retired voucher, counted in the
	// database's async_failed_orders, where its dead letters were copied.
	Kept int64
	// Retired is true when the voucher's keys were retired (Config.Retention): Redis keeps
	// its sale hash only, with the stock it ended with, and no order of it is pending.
	Retired bool
}

// Drift is RedisStock + Pending + Orders − Initial: zero when the books agree; below zero
// units are lost (under-sold), above zero Redis counts units the database lacks (each would
// admit an order the database refuses). A dead letter of an order the database's stock was
// short of keeps its unit (async_dead.lua) and so takes one off a drift above zero: Kept
// counts those, and Drift + Kept is how far the books had drifted before them.
func (b Book) Drift() int64 { return b.RedisStock + b.Pending + b.Orders - b.Initial }

// booksReader is what Reconcile needs of Redis: the books script, and reads of the
// dead-letter stream.
type booksReader interface {
	redis.Scripter
	XRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
}

// reconcilePage is how many order rows Reconcile takes from the database at a time.
const reconcilePage = 10_000

// Reconcile reads voucherID's books: Redis first (the stock, the stream and the dead-letter
// stream's length in one script), then the database (stock and rows in one transaction), then
// the dead letters Redis's read counted. An order written between the two reads is counted
// once, as a row. An order admitted in between is not seen by Redis's read but, if written
// before the database's, is a row: while orders flow the books can show a transient drift, so
// callers read again before they report one (see ReconcileSettled).
//
// The rows are counted a page at a time and not kept: of them, Reconcile needs only how many
// there are and which of the stream's orders they include. The stream holds only the orders
// not yet written, so it is the short side, held whole, and each page is checked against it.
func Reconcile(ctx context.Context, rdb booksReader, store *Store, voucherID int64) (Book, error) {
	rb, err := readRedisBooks(ctx, rdb, voucherID, "")
	if err != nil {
		return Book{}, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
	}
	// The stream's entries per order id: each entry whose order has a row is not pending.
	inStream := make(map[int64]int64, len(rb.stream))
	for _, e := range rb.stream {
		inStream[e.OrderID]++
	}
	var rows, written int64
	v, err := store.ReadBooks(ctx, voucherID, reconcilePage, func(ids, _ []int64) error {
		rows += int64(len(ids))
		for _, id := range ids {
			written += inStream[id] // an order id is one row at most (the primary key)
		}
		return nil
	})
	if err != nil {
		return Book{}, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
	}
	book := Book{VoucherID: voucherID, Loaded: rb.loaded, RedisStock: rb.stock, DBStock: int64(v.Stock),
		Orders: rows, Initial: int64(v.Stock) + rows, Pending: int64(len(rb.stream)) - written}
	book.Retired = rb.retired
	if rb.retired {
		// Nothing is dead-lettered after the retirement (its stream was empty, and its sale
		// over): the database's copy is all of them.
		book.Kept, err = store.KeptOf(ctx, voucherID)
	} else {
		book.Kept, err = countKept(ctx, rdb, keysOf(voucherID).dead, rb.dead)
	}
	if err != nil {
		return Book{}, fmt.Errorf("reconcile voucher %d: %w", voucherID, err)
	}
	return book, nil
}

// keptPage is how many dead letters one read of the dead-letter stream takes.
const keptPage = 1000

// countKept counts the dead letters whose unit was kept among the first n of dead: those the
// books script saw, and no later one, whose order it counted pending. A page at a time, so
// that a long dead-letter stream does not hold Redis in one reply.
func countKept(ctx context.Context, rdb booksReader, dead string, n int64) (int64, error) {
	var kept, seen int64
	start := "-"
	for seen < n {
		msgs, err := rdb.XRangeN(ctx, dead, start, "+", min(keptPage, n-seen)).Result()
		if err != nil {
			return 0, fmt.Errorf("read dead letters: %w", err)
		}
		if len(msgs) == 0 {
			break // trimmed by hand: count what is left
		}
		for _, m := range msgs {
			if m.Values["unit"] == "kept" {
				kept++
			}
		}
		seen += int64(len(msgs))
		start = "(" + msgs[len(msgs)-1].ID
	}
	return kept, nil
}

// ReconcileSettled reads the books up to tries times and returns the first that agree, or
// the last: a drift seen on every read is not a race with the writer.
func ReconcileSettled(ctx context.Context, rdb booksReader, store *Store, voucherID int64, tries int) (Book, error) {
	var b Book
	var err error
	for range max(tries, 1) {
		if b, err = Reconcile(ctx, rdb, store, voucherID); err != nil || !b.Loaded || b.Drift() == 0 {
			return b, err
		}
	}
	return b, err
}
