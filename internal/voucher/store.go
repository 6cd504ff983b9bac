package voucher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// voucherRow maps the vouchers table.
type voucherRow struct {
	ID          int64 `gorm:"primaryKey"`
	Title       string
	SubTitle    string
	Rules       string
	PayValue    int64
	ActualValue int64
	Status      int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (voucherRow) TableName() string { return "vouchers" }

// seckillRow maps the seckill_vouchers table.
type seckillRow struct {
	VoucherID int64 `gorm:"primaryKey;autoIncrement:false"`
	Stock     int
	BeginTime time.Time
	EndTime   time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (seckillRow) TableName() string { return "seckill_vouchers" }

// statusOnSale is tb_voucher's "on the shelf" status.
const statusOnSale = 1

// Store keeps vouchers in SQL through GORM.
type Store struct {
	db *gorm.DB
}

// NewStore returns a store over db, whose schema the migrations created.
func NewStore(db *gorm.DB) *Store { return &Store{db: db} }

// Create inserts the voucher and its seckill row in one transaction and returns it with its id.
func (s *Store) Create(ctx context.Context, v Voucher) (Voucher, error) {
	vr := voucherRow{
		Title: v.Title, SubTitle: v.SubTitle, Rules: v.Rules,
		PayValue: v.PayValue, ActualValue: v.ActualValue, Status: statusOnSale,
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&vr).Error; err != nil {
			return err
		}
		sr := seckillRow{VoucherID: vr.ID, Stock: v.Stock, BeginTime: v.BeginTime.UTC(), EndTime: v.EndTime.UTC()}
		return tx.Create(&sr).Error
	})
	if err != nil {
		return Voucher{}, fmt.Errorf("create voucher: %w", err)
	}
	return s.Get(ctx, vr.ID)
}

// Get returns the voucher with its current stock, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Voucher, error) {
	var r struct {
		ID, PayValue, ActualValue int64
		Title, SubTitle, Rules    string
		Stock                     int
		BeginTime, EndTime        time.Time
		CreatedAt, UpdatedAt      time.Time
		ReadAtMicros              int64
	}
	err := s.db.WithContext(ctx).Table("vouchers v").
		Select("v.id, v.title, v.sub_title, v.rules, v.pay_value, v.actual_value, v.created_at, v.updated_at, s.stock, s.begin_time, s.end_time, "+
			s.clockSQL()+" AS read_at_micros").
		Joins("JOIN seckill_vouchers s ON s.voucher_id = v.id").
		Where("v.id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Voucher{}, ErrNotFound
	}
	if err != nil {
		return Voucher{}, fmt.Errorf("get voucher %d: %w", id, err)
	}
	return Voucher{
		ID: r.ID, Title: r.Title, SubTitle: r.SubTitle, Rules: r.Rules,
		PayValue: r.PayValue, ActualValue: r.ActualValue, Stock: r.Stock,
		BeginTime: r.BeginTime.UTC(), EndTime: r.EndTime.UTC(),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		ReadAt: time.UnixMicro(r.ReadAtMicros).UTC(),
	}, nil
}

// clockSQL is the database's clock in microseconds since the Unix epoch, in s's dialect: the
// read's ReadAt. On MySQL the difference of two UTC DATETIMEs, with no time zone conversion (a
// session's zone with daylight saving would make UNIX_TIMESTAMP(NOW(6)) ambiguous for an hour a
// year); SQLite's julianday('now') is a double of days, about 10 µs apart at today's dates.
func (s *Store) clockSQL() string {
	if s.db.Dialector.Name() == "sqlite" {
		return "CAST(ROUND((julianday('now') - 2440587.5) * 86400000000) AS INTEGER)"
	}
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
}

// EndSales ends now the sales of those of ids still on sale at now (their end_time after
// it): their end becomes now, to the millisecond, so that nothing takes them for on sale
// any more (the asynchronous mode's start loads every voucher whose end is ahead into
// Redis). A sale that has ended keeps its end. It returns how many sales it ended.
func (s *Store) EndSales(ctx context.Context, ids []int64, now time.Time) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	now = now.UTC().Truncate(time.Millisecond)
	res := s.db.WithContext(ctx).Model(&seckillRow{}).Where("end_time > ? AND voucher_id IN ?", now, ids).
		Updates(map[string]any{"end_time": now, "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("end the sales of vouchers %v: %w", ids, res.Error)
	}
	return res.RowsAffected, nil
}
