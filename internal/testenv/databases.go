package testenv

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/database"
)

// Databases returns the embedded SQLite database (in t.TempDir(); not when RealOnly) and, in
// integration builds, a fresh database on the real MariaDB/MySQL, each migrated and closed when
// t ends. The map is keyed "sqlite" and "mysql".
func Databases(t testing.TB, pool database.Pool) map[string]*database.DB {
	t.Helper()
	ctx := context.Background()
	dbs := map[string]*database.DB{}
	if !RealOnly() {
		sqlite, err := database.OpenSQLite(ctx, t.TempDir(), pool)
		if err != nil {
			t.Fatalf("open SQLite: %v", err)
		}
		dbs["sqlite"] = sqlite
	}
	if Integration {
		mysql, err := database.OpenMySQL(ctx, MySQLDSN(t), pool)
		if err != nil {
			t.Fatalf("open MySQL: %v", err)
		}
		dbs["mysql"] = mysql
	}
	for _, db := range dbs {
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("migrate %s: %v", db.Dialect, err)
		}
	}
	return dbs
}
