package lock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/seckill/seckill/migrations"
)

// Owner exposes owner to the external tests, which check the value a SimpleRedisLock writes.
var Owner = owner

// ExpireMySQLLock moves the expiry of name's row one second into the past on the database's
// clock, as if its holder had crashed a lease ago: the controlled expiry of the tests.
func ExpireMySQLLock(ctx context.Context, db *sql.DB, dialect migrations.Dialect, name string) error {
	past := map[migrations.Dialect]string{
		migrations.MySQL:  "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND",
		migrations.SQLite: "strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 seconds')",
	}[dialect]
	res, err := db.ExecContext(ctx, "UPDATE distributed_locks SET expires_at = "+past+" WHERE name = ?", name)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("expire %s: %d rows, %v", name, n, err)
	}
	return nil
}
