package verdict

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/migrations"
)

// uniqueKeyQuery counts the unique keys on voucher_orders (user_id, voucher_id), per dialect.
// SQLite does not keep a constraint's name, so there the key is found by its columns, in
// either order: both make the pair unique (voucher_id leads since migration 00008).
var uniqueKeyQuery = map[migrations.Dialect]string{
	migrations.MySQL: `SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'voucher_orders'
		AND index_name = 'uk_user_voucher' AND non_unique = 0`,
	migrations.SQLite: `SELECT COUNT(*) FROM pragma_index_list('voucher_orders') il
		WHERE il."unique" = 1
		AND (SELECT group_concat(ii.name) FROM pragma_index_info(il.name) ii) IN ('user_id,voucher_id', 'voucher_id,user_id')`,
}

// ReadDB reads the run's vouchers (ID and initial Stock given) and their orders from db into
// f, and compares the orders with the ones the client saw answered 201.
func ReadDB(ctx context.Context, db *database.DB, vouchers []Voucher, answered []Answered, f *Facts) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	ids := make([]any, 0, len(vouchers))
	for _, v := range vouchers {
		err := sqlDB.QueryRowContext(ctx, "SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", v.ID).Scan(&v.StockLeft)
		if err != nil {
			return fmt.Errorf("stock of voucher %d: %w", v.ID, err)
		}
		if err := sqlDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM voucher_orders WHERE voucher_id = ?", v.ID).Scan(&v.Orders); err != nil {
			return fmt.Errorf("orders of voucher %d: %w", v.ID, err)
		}
		f.Vouchers = append(f.Vouchers, v)
		ids = append(ids, v.ID)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"

	err = sqlDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM (
		SELECT user_id, voucher_id FROM voucher_orders WHERE voucher_id IN `+in+`
		GROUP BY user_id, voucher_id HAVING COUNT(*) > 1) d`, ids...).Scan(&f.DuplicateGroups)
	if err != nil {
		return fmt.Errorf("duplicate rows: %w", err)
	}
	var uk int
	if err := sqlDB.QueryRowContext(ctx, uniqueKeyQuery[db.Dialect]).Scan(&uk); err != nil {
		return fmt.Errorf("unique key: %w", err)
	}
	f.UniqueKey = uk > 0

	inDB, err := orderOwners(ctx, sqlDB, in, ids)
	if err != nil {
		return err
	}
	Compare(answered, inDB, f)
	return nil
}

// orderOwners reads the orders of the vouchers ids (in is their placeholder list), keyed by
// decimal order id.
func orderOwners(ctx context.Context, db *sql.DB, in string, ids []any) (map[string]Owner, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, user_id, voucher_id FROM voucher_orders WHERE voucher_id IN "+in, ids...)
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	defer rows.Close()
	inDB := map[string]Owner{}
	for rows.Next() {
		var id uint64
		var o Owner
		if err := rows.Scan(&id, &o.User, &o.Voucher); err != nil {
			return nil, fmt.Errorf("orders: %w", err)
		}
		inDB[strconv.FormatUint(id, 10)] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	return inDB, nil
}

// Orders reads the orders of the vouchers ids, keyed by decimal order id: for a client that
// must look up an order whose 201 it lost (a retry answered already_ordered carries no id).
func Orders(ctx context.Context, db *database.DB, ids []int64) (map[string]Owner, error) {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return nil, err
	}
	args := make([]any, 0, len(ids))
	for _, id := range ids {
		args = append(args, id)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	return orderOwners(ctx, sqlDB, in, args)
}
