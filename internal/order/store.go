package order

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/migrations"
)

// The order's statements. Each is one round trip: OpenMySQL interpolates the arguments
// client-side instead of preparing every statement.
const (
	insertOrder = "INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
	takeStock   = "UPDATE seckill_vouchers SET stock = stock - 1, updated_at = ? WHERE voucher_id = ? AND stock > 0"
	countOrders = "SELECT COUNT(*) FROM voucher_orders WHERE user_id = ? AND voucher_id = ?"
	// takeStockAndCommit is the end of the order's transaction on MySQL, in one round trip:
	// the voucher's row stays locked only while the server runs the two statements. A sold-out
	// voucher fails stockCheck, and the server runs no statement after a failed one, so
	// nothing commits; hence no "stock > 0" here, which would match no row and commit anyway.
	takeStockAndCommit = "UPDATE seckill_vouchers SET stock = stock - 1, updated_at = ? WHERE voucher_id = ?; COMMIT"
	// stockCheck is the constraint that keeps stock at zero or above (migration 00004).
	stockCheck = "ck_seckill_vouchers_stock"
)

// orderRow maps the voucher_orders table for the reads of an order.
type orderRow struct {
	ID        int64 `gorm:"primaryKey;autoIncrement:false"`
	UserID    int64
	VoucherID int64
	Status    int
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (orderRow) TableName() string { return "voucher_orders" }

// SQLStore keeps orders in MySQL/MariaDB or the embedded SQLite database.
type SQLStore struct {
	db *database.DB
	// begin starts the order's transaction. On MySQL its read view is taken at BEGIN (WITH
	// CONSISTENT SNAPSHOT), so that a refused insert can tell an order committed before the
	// transaction began from one committed while it ran (see existing). SQLite's begins
	// IMMEDIATE: one writer at a time, taking the write lock up front.
	begin string
	// checkBeforeTx runs the existing-order read and the business step before the
	// transaction. SQLite's writers are serialised, so inside the transaction every other
	// order has committed or not begun, and a racing duplicate would look like an earlier
	// order; read before it, the check races with a duplicate the way MySQL's snapshot does,
	// and an unguarded duplicate reaches the unique key on both databases.
	checkBeforeTx bool
	// fences are the dialect's statements on lock_fences (claimFence, PruneFences).
	fences fenceSQL
	// oneTripCommit takes stock and commits in one round trip (takeStockAndCommit), on
	// MySQL. SQLite, in process and one writer at a time, has no round trip to save.
	oneTripCommit bool
}

// NewSQLStore returns the order store over db.
func NewSQLStore(db *database.DB) *SQLStore {
	if db.Dialect == migrations.SQLite {
		return &SQLStore{db: db, begin: "BEGIN IMMEDIATE", checkBeforeTx: true, fences: fenceStatements[migrations.SQLite]}
	}
	return &SQLStore{db: db, begin: "START TRANSACTION WITH CONSISTENT SNAPSHOT", fences: fenceStatements[migrations.MySQL], oneTripCommit: true}
}

// Create places o in one transaction and returns nil once it committed. process, the business
// step of the critical section (may be nil), runs first; then the transaction inserts the
// order, whose unique key uk_user_voucher is the existing-order check, and last takes one from
// stock, so the voucher's row, which every order of the voucher updates, stays locked only
// from that update to the commit; on MySQL the update and the COMMIT are one round trip.
//
// It returns ErrAlreadyOrdered when the user's order of the voucher had committed before the
// transaction began, ErrDuplicate when the unique key refused an order that another
// transaction committed while this one ran, or the insert deadlocked with another of the
// same user's (either way a duplicate that only the database stopped), and ErrSoldOut when
// no stock is left; then nothing was written. Any other error wraps the
// database's or process's error, or ctx's; after a COMMIT whose answer was lost (the
// connection failed or ctx ended) the order may have committed.
//
// A fence with a token is claimed twice (see claimFence): first, committed at once, before
// the existing-order check, so that every older holder of the lock learns of this grant
// before this order reads anything; then inside the transaction, before the order is
// inserted or stock taken. Either claim finding a larger token returns ErrFenced, and
// nothing is written.
func (s *SQLStore) Create(ctx context.Context, o Order, fence Fence, process func(context.Context) error) error {
	if process == nil {
		process = func(context.Context) error { return nil }
	}
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return fmt.Errorf("create order: %w", err)
	}
	if err := claimFence(ctx, sqlDB, s.fences.claim, fence); err != nil {
		return err
	}
	if s.checkBeforeTx {
		if err := ordered(ctx, sqlDB, o); err != nil {
			return err
		}
		if err := process(ctx); err != nil {
			return err
		}
		process = nil
	}
	conn, err := sqlDB.Conn(ctx) // waits for a pooled connection no longer than ctx allows
	if err != nil {
		return fmt.Errorf("create order: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, s.begin); err != nil {
		discard(conn)
		return fmt.Errorf("create order: begin: %w", err)
	}
	if err := s.place(ctx, conn, o, fence, process); err != nil {
		rollback(ctx, conn)
		return err
	}
	if s.oneTripCommit {
		return commitWithStock(ctx, conn, o.VoucherID)
	}
	if err := take(ctx, conn, o.VoucherID); err != nil {
		rollback(ctx, conn)
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		discard(conn)
		return fmt.Errorf("create order: commit: %w", err)
	}
	return nil
}

// take takes one from the voucher's stock, or returns ErrSoldOut when none is left.
func take(ctx context.Context, conn *sql.Conn, voucherID int64) error {
	res, err := conn.ExecContext(ctx, takeStock, time.Now().UTC(), voucherID)
	if err != nil {
		return fmt.Errorf("take stock: %w", err)
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return fmt.Errorf("take stock: %w", err)
	case n == 0:
		return ErrSoldOut
	}
	return nil
}

// commitWithStock ends the order's transaction on MySQL: takes one from the voucher's stock
// and commits, in one round trip (takeStockAndCommit). It returns ErrSoldOut, and rolls back,
// when the stock check refused the update. An error the server answered stopped it before
// the COMMIT ran, or was the COMMIT's own failure: nothing committed. Any other error (the
// connection failed, ctx ended) leaves the commit unknown, and the connection is discarded.
func commitWithStock(ctx context.Context, conn *sql.Conn, voucherID int64) error {
	var taken []int64
	err := conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("driver %T cannot execute statements", dc)
		}
		res, err := ex.ExecContext(ctx, takeStockAndCommit,
			[]driver.NamedValue{{Ordinal: 1, Value: time.Now().UTC()}, {Ordinal: 2, Value: voucherID}})
		if err != nil {
			return err
		}
		if r, ok := res.(mysqldriver.Result); ok {
			taken = r.AllRowsAffected()
		}
		return nil
	})
	var me *mysqldriver.MySQLError
	switch {
	case database.IsCheckViolation(err, stockCheck):
		rollback(ctx, conn)
		return ErrSoldOut
	case errors.As(err, &me):
		rollback(ctx, conn)
		return fmt.Errorf("create order: take stock and commit: %w", err)
	case err != nil:
		discard(conn)
		return fmt.Errorf("create order: take stock and commit: %w", err)
	case len(taken) != 2 || taken[0] != 1:
		// The voucher was read through its seckill_vouchers row and rows go only with their
		// voucher: not expected, but then the order committed and took no stock.
		return fmt.Errorf("create order: committed, but the stock update changed %v rows of voucher %d", taken, voucherID)
	}
	return nil
}

// place is the work of the order's transaction up to the stock, step by step.
func (s *SQLStore) place(ctx context.Context, conn *sql.Conn, o Order, fence Fence, process func(context.Context) error) error {
	if process != nil {
		if err := process(ctx); err != nil {
			return err
		}
	}
	if err := claimFence(ctx, conn, s.fences.claim, fence); err != nil {
		return err
	}
	_, err := conn.ExecContext(ctx, insertOrder, o.ID, o.UserID, o.VoucherID, o.Status, o.CreatedAt, o.CreatedAt)
	switch {
	case database.IsUniqueViolation(err, "uk_user_voucher", "voucher_orders.user_id", "voucher_orders.voucher_id"):
		return s.existing(ctx, conn, o)
	case database.IsDeadlock(err):
		// Only inserts of the same key wait on each other here: two or more transactions of
		// this user were inserting at once, and when the first rolled back (sold out) the
		// waiters deadlocked on its key. A duplicate that only the database stopped.
		return ErrDuplicate
	case err != nil:
		return fmt.Errorf("insert order: %w", err)
	}
	return nil
}

// existing says why the unique key refused o: ErrAlreadyOrdered when the user's order was in
// the transaction's snapshot, that is committed before it began, and ErrDuplicate when it
// committed while the transaction ran: two orders of the user were in progress at once, which
// the per-user lock exists to prevent. On SQLite, whose check ran before the transaction,
// every refusal is ErrDuplicate.
func (s *SQLStore) existing(ctx context.Context, conn *sql.Conn, o Order) error {
	if s.checkBeforeTx {
		return ErrDuplicate
	}
	if err := ordered(ctx, conn, o); !errors.Is(err, ErrAlreadyOrdered) {
		if err != nil {
			return err
		}
		return ErrDuplicate
	}
	return ErrAlreadyOrdered
}

// querier is what ordered reads with: a pool or a connection.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ordered returns ErrAlreadyOrdered if q sees an order of o's user and voucher.
func ordered(ctx context.Context, q querier, o Order) error {
	var n int64
	if err := q.QueryRowContext(ctx, countOrders, o.UserID, o.VoucherID).Scan(&n); err != nil {
		return fmt.Errorf("check existing order: %w", err)
	}
	if n > 0 {
		return ErrAlreadyOrdered
	}
	return nil
}

// rollback ends the transaction on conn without its writes. When ctx is done, or ROLLBACK
// fails, the connection is closed instead, which rolls back on the server: it must never go
// back to the pool with a transaction open.
func rollback(ctx context.Context, conn *sql.Conn) {
	if ctx.Err() != nil {
		discard(conn)
		return
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		discard(conn)
	}
}

// discard makes database/sql close conn when it is released instead of pooling it.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// Get returns the order id, or ErrNotFound.
func (s *SQLStore) Get(ctx context.Context, id int64) (Order, error) {
	return s.take(ctx, "get order", "id = ?", id)
}

// GetByUser returns userID's order of voucherID, or ErrNotFound.
func (s *SQLStore) GetByUser(ctx context.Context, userID, voucherID int64) (Order, error) {
	return s.take(ctx, "get order by user", "user_id = ? AND voucher_id = ?", userID, voucherID)
}

// take reads the one order that where selects, by the primary or the unique key.
func (s *SQLStore) take(ctx context.Context, op, where string, args ...any) (Order, error) {
	var row orderRow
	err := s.db.DB.WithContext(ctx).Where(where, args...).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("%s: %w", op, err)
	}
	return Order{ID: row.ID, UserID: row.UserID, VoucherID: row.VoucherID, Status: row.Status, CreatedAt: row.CreatedAt.UTC()}, nil
}
