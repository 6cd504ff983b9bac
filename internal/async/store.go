package async

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/migrations"
)

// Entry is one admitted order as the stream carries it.
type Entry struct {
	// StreamID is the stream entry's id.
	StreamID  string
	OrderID   int64
	UserID    int64
	VoucherID int64
	// At is when it was admitted: the order's created_at.
	At time.Time
}

// Outcome is what Store.Write did with one entry.
type Outcome int

// The outcomes of Store.Write.
const (
	// Written: the row was inserted in this transaction.
	Written Outcome = iota + 1
	// Existed: a row with the order's id was already there (a redelivered entry): nothing
	// inserted, no stock taken; the entry is acknowledged.
	Existed
	// Conflict: the user already has another order of the voucher; nothing inserted. The
	// entry counts a failed attempt.
	Conflict
)

// takeVoucherRow takes the voucher's row, changing nothing, and holds it to the transaction's
// end: Write and ReadBooks wait there for a writer of the voucher in commit.
const takeVoucherRow = "UPDATE seckill_vouchers SET stock = stock WHERE voucher_id = ?"

// ordersOfVoucher reads every order of a voucher (readOrders). uk_user_voucher, voucher_id
// first, holds all it reads (migration 00008): it reads that index alone, never the rows.
const ordersOfVoucher = "SELECT id, user_id FROM voucher_orders WHERE voucher_id = ?"

// Store writes admitted orders to the database and reads the books a reload starts from.
type Store struct {
	db      *gorm.DB
	dialect migrations.Dialect
}

// NewStore returns the asynchronous mode's store over db.
func NewStore(db *database.DB) *Store { return &Store{db: db.DB, dialect: db.Dialect} }

// ErrEntriesGone is Write's error when the held check found entries of the batch no longer
// in their stream: Redis lost them (it restarted empty) or another consumer settled them.
// Nothing was written.
var ErrEntriesGone = errors.New("async: entries left the stream")

// Held checks, inside Write's transaction, that the entries about to be written are still
// waiting in Redis. It returns ErrEntriesGone when some are not, another error when it could
// not tell.
type Held func(ctx context.Context, es []Entry) error

// Write writes es, all of one voucher, in one transaction: the rows of es that are not there
// yet in one multi-row INSERT, and one stock UPDATE for all of them. It returns each entry's
// outcome, or ErrStockShort (nothing written) when the database's stock cannot cover the new
// rows, or the database's error (nothing written). A concurrent writer of the same entries
// holds the voucher's row: Write waits for its commit and finds them Existed.
//
// Write first takes the voucher's row, which it holds until the commit, and only then reads
// the orders already there. Every writer of the voucher's orders takes that row before it
// inserts, so the read comes after the commit of any other writer that held it. The order
// matters: InnoDB's REPEATABLE READ takes a transaction's snapshot at its first consistent
// read, and a read before the row was taken would miss the rows of a writer still in commit
// (another consumer that claimed the same entries while it was slow). Its entries would look
// new, and the stock UPDATE, run once that writer committed, would find the stock it lowered:
// ErrStockShort when that was the last of it, a refusal of orders that are written. (SQLite's
// transactions take the database's write lock at BEGIN, which serialises them the same way.)
//
// held, unless nil, runs after the stock UPDATE, while the voucher's row is held, with the
// entries to be inserted; its error rolls everything back and is returned. ReadBooks takes
// the same row first, so a reload reads the database either after this commit or before a
// held check that then finds the entries gone (see ReadBooks).
//
// A batch whose entries are all new, as nearly every batch of a sale is, is first written
// without that read (writeNew): the stock UPDATE takes the row, and the INSERT's own unique
// checks find an entry already written. When they do, or the stock or the held check refuses,
// that transaction is rolled back and the batch is written again as above, which tells each
// entry's outcome; either way the rows, the stock and the outcomes are the same.
func (s *Store) Write(ctx context.Context, voucherID int64, es []Entry, held Held) ([]Outcome, error) {
	if len(es) > 0 {
		out, err := s.writeNew(ctx, voucherID, es, held)
		if !errors.Is(err, errNotAllNew) {
			return out, err
		}
	}
	return s.writeChecked(ctx, voucherID, es, held)
}

// errNotAllNew is writeNew's error when it wrote nothing because the batch may not be all new
// orders: an entry's order or user already has a row (or a user has two entries), the stock
// does not cover every entry, or the held check found entries gone. writeChecked then decides
// each entry.
var errNotAllNew = errors.New("async: the batch is not all new orders")

// writeNew writes every entry of es as a new order in one transaction of three statements:
// the stock UPDATE (which takes the voucher's row, as takeVoucherRow does), the held check, the
// INSERT. errNotAllNew, with nothing written, when one of them refuses; the database's or the
// held check's other errors as Write returns them.
func (s *Store) writeNew(ctx context.Context, voucherID int64, es []Entry, held Held) ([]Outcome, error) {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		if covered, err := takeStock(tx, voucherID, len(es), now); err != nil || !covered {
			return cmp.Or(err, errNotAllNew)
		}
		if held != nil {
			if err := held(ctx, es); err != nil {
				if errors.Is(err, ErrEntriesGone) {
					return errNotAllNew
				}
				return err
			}
		}
		err := s.insert(tx, voucherID, es, now)
		if database.IsUniqueViolation(err, "PRIMARY", "voucher_orders.id") ||
			database.IsUniqueViolation(err, "uk_user_voucher", "voucher_orders.user_id", "voucher_orders.voucher_id") {
			return errNotAllNew
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Outcome, len(es))
	for i := range out {
		out[i] = Written
	}
	return out, nil
}

// takeStock lowers voucherID's stock by n in tx, taking its row, and reports whether the stock
// covered n (false: nothing changed).
func takeStock(tx *gorm.DB, voucherID int64, n int, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE seckill_vouchers SET stock = stock - ?, updated_at = ? WHERE voucher_id = ? AND stock >= ?",
		n, now, voucherID, n)
	if res.Error != nil {
		return false, fmt.Errorf("take stock: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// insert inserts es as new orders of voucherID in one multi-row INSERT.
func (s *Store) insert(tx *gorm.DB, voucherID int64, es []Entry, now time.Time) error {
	values := make([]string, len(es))
	args := make([]any, 0, 6*len(es))
	for i, e := range es {
		values[i] = "(?, ?, ?, ?, ?, ?)"
		args = append(args, e.OrderID, e.UserID, voucherID, order.StatusUnpaid, e.At.UTC(), now)
	}
	if err := tx.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES "+
		strings.Join(values, ", "), args...).Error; err != nil {
		return fmt.Errorf("insert orders: %w", err)
	}
	return nil
}

// writeChecked is Write's careful path: it reads which entries are already written, then
// writes the others.
func (s *Store) writeChecked(ctx context.Context, voucherID int64, es []Entry, held Held) ([]Outcome, error) {
	out := make([]Outcome, len(es))
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// One statement per batch: take the voucher's row before anything is read (see above).
		if err := tx.Exec(takeVoucherRow, voucherID).Error; err != nil {
			return fmt.Errorf("wait for the writers of voucher %d: %w", voucherID, err)
		}
		ids := make([]int64, len(es))
		users := make([]int64, len(es))
		for i, e := range es {
			ids[i], users[i] = e.OrderID, e.UserID
		}
		var rows []struct{ ID, UserID int64 }
		if err := tx.Raw("SELECT id, user_id FROM voucher_orders WHERE voucher_id = ? AND (id IN ? OR user_id IN ?)",
			voucherID, ids, users).Scan(&rows).Error; err != nil {
			return fmt.Errorf("read existing orders: %w", err)
		}
		byID := make(map[int64]bool, len(rows))
		byUser := make(map[int64]bool, len(rows))
		for _, r := range rows {
			byID[r.ID], byUser[r.UserID] = true, true
		}
		var written []Entry
		now := time.Now().UTC()
		for i, e := range es {
			switch {
			case byID[e.OrderID]:
				out[i] = Existed
			case byUser[e.UserID]:
				out[i] = Conflict
			default:
				out[i] = Written
				byUser[e.UserID] = true // a second entry of the user in this batch conflicts
				written = append(written, e)
			}
		}
		if len(written) == 0 {
			return nil
		}
		if covered, err := takeStock(tx, voucherID, len(written), now); err != nil || !covered {
			return cmp.Or(err, ErrStockShort)
		}
		if held != nil {
			if err := held(ctx, written); err != nil {
				return err
			}
		}
		return s.insert(tx, voucherID, written, now)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadBooks reads voucherID and its order rows as of one moment, so that the stock and the
// rows agree (the writer changes both in one transaction), and hands the rows to each, page
// rows at a time (the order ids in ids, each one's user at the same index in users; both
// slices are used again once each returns), without holding them all. each's error ends the
// read and is returned; voucher.ErrNotFound when there is no such seckill voucher.
//
// That moment comes once it has taken the voucher's row as a writer does (an UPDATE that
// changes nothing): it waits for a Write holding the row to commit or roll back, and reads
// what that left. A batch whose held check passed before Redis lost its stream is then in the
// rows a reload starts from, and one whose check comes after that moment finds its entries
// gone and is not committed: either way the reload neither sells its units again nor frees
// its users. (A batch of a stream Redis kept was in the stream the reload read first, and is
// counted pending when it commits after that moment.) SQLite's write transactions take the
// database's write lock at BEGIN, which serialises them the same way.
//
// The row is held until that moment only, not while the rows are read: a second transaction,
// read-only and REPEATABLE READ (SQLite: a read transaction, WAL), makes its first read, the
// voucher's, while the first one holds the row, which fixes its snapshot there; the first
// then ends, and the rows are read from the snapshot, which a writer committing since does not
// change. A writer, or another instance's load, thus waits for the row as long as one Write
// takes and not for a read of millions of rows, which outlasts the DSN's readTimeout on which
// its wait fails (or, on SQLite, its own deadline). ReadBooks takes two connections of the
// pool at once, the snapshot's first, so that the row is never held while waiting for one.
func (s *Store) ReadBooks(ctx context.Context, voucherID int64, page int, each func(ids, users []int64) error) (voucher.Voucher, error) {
	var v voucher.Voucher
	err := s.db.WithContext(ctx).Transaction(func(snap *gorm.DB) error {
		if err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(takeVoucherRow, voucherID).Error; err != nil {
				return fmt.Errorf("wait for the writers of voucher %d: %w", voucherID, err)
			}
			// The snapshot's first read, while tx holds the row, fixes what it reads.
			var err error
			v, err = voucher.NewStore(snap).Get(ctx, voucherID)
			return err
		}); err != nil {
			return err
		}
		return readOrders(snap, voucherID, page, each)
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if errors.Is(err, voucher.ErrNotFound) {
		return voucher.Voucher{}, voucher.ErrNotFound
	}
	return v, err
}

// readOrders reads voucherID's order rows in tx and hands them to each, page at a time.
func readOrders(tx *gorm.DB, voucherID int64, page int, each func(ids, users []int64) error) error {
	rows, err := tx.Raw(ordersOfVoucher, voucherID).Rows()
	if err != nil {
		return fmt.Errorf("read orders of voucher %d: %w", voucherID, err)
	}
	defer rows.Close()
	ids, users := make([]int64, 0, page), make([]int64, 0, page)
	for rows.Next() {
		var id, user int64
		if err := rows.Scan(&id, &user); err != nil {
			return fmt.Errorf("read orders of voucher %d: %w", voucherID, err)
		}
		ids, users = append(ids, id), append(users, user)
		if len(ids) == page {
			if err := each(ids, users); err != nil {
				return err
			}
			ids, users = ids[:0], users[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read orders of voucher %d: %w", voucherID, err)
	}
	if len(ids) == 0 {
		return nil
	}
	return each(ids, users)
}

// OnSale returns the ids of the seckill vouchers whose sale has not ended at now.
func (s *Store) OnSale(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Raw("SELECT voucher_id FROM seckill_vouchers WHERE end_time > ? ORDER BY voucher_id",
		now.UTC()).Scan(&ids).Error; err != nil {
		return nil, fmt.Errorf("vouchers on sale: %w", err)
	}
	return ids, nil
}

// All returns the ids of every seckill voucher.
func (s *Store) All(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Raw("SELECT voucher_id FROM seckill_vouchers ORDER BY voucher_id").Scan(&ids).Error; err != nil {
		return nil, fmt.Errorf("vouchers: %w", err)
	}
	return ids, nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}
