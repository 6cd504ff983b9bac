package order

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/migrations"
)

// orderRow maps the voucher_orders table.
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
	db *gorm.DB
	// checkBeforeTx moves the existing-order read in front of the write transaction. SQLite
	// transactions here begin IMMEDIATE (one writer at a time), so a read inside one is
	// already serialised with every other order and could never race; reading first gives
	// the same non-locking snapshot read that MySQL's REPEATABLE READ makes inside its
	// transaction, so an unguarded duplicate reaches the unique key on both databases.
	checkBeforeTx bool
}

// NewSQLStore returns the order store over db.
func NewSQLStore(db *database.DB) *SQLStore {
	return &SQLStore{db: db.DB, checkBeforeTx: db.Dialect == migrations.SQLite}
}

// Create places o in one transaction: refuse if the user already has an order of the voucher
// (ErrAlreadyOrdered), take one from stock only while stock > 0 (ErrSoldOut), insert the
// order. A unique-key refusal returns ErrDuplicate. process runs between the existing-order
// check and the writes: the business step of the critical section (may be nil).
//
// A fence with a token is claimed twice (see claimFence): first, committed at once, before
// the existing-order check, so that every older holder of the lock learns of this grant
// before this order reads anything; then inside the transaction, before stock or orders are
// touched. Either claim finding a larger token returns ErrFenced, and nothing is written.
func (s *SQLStore) Create(ctx context.Context, o Order, fence Fence, process func(context.Context) error) error {
	db := s.db.WithContext(ctx)
	if err := claimFence(db, fence); err != nil {
		return err
	}
	check := func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&orderRow{}).Where("user_id = ? AND voucher_id = ?", o.UserID, o.VoucherID).Count(&n).Error; err != nil {
			return fmt.Errorf("check existing order: %w", err)
		}
		if n > 0 {
			return ErrAlreadyOrdered
		}
		if process != nil {
			return process(ctx)
		}
		return nil
	}
	if s.checkBeforeTx {
		if err := check(db); err != nil {
			return err
		}
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		if !s.checkBeforeTx {
			if err := check(tx); err != nil {
				return err
			}
		}
		if err := claimFence(tx, fence); err != nil {
			return err
		}
		res := tx.Exec("UPDATE seckill_vouchers SET stock = stock - 1, updated_at = ? WHERE voucher_id = ? AND stock > 0",
			time.Now().UTC(), o.VoucherID)
		if res.Error != nil {
			return fmt.Errorf("take stock: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrSoldOut
		}
		row := orderRow{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, Status: o.Status, CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt}
		if err := tx.Create(&row).Error; err != nil {
			if database.IsUniqueViolation(err, "uk_user_voucher", "voucher_orders.user_id", "voucher_orders.voucher_id") {
				return ErrDuplicate
			}
			return fmt.Errorf("insert order: %w", err)
		}
		return nil
	})
	return err
}
