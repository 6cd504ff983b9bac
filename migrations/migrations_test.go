package migrations_test

import (
	"cmp"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/migrations"
)

// wantSchema is the schema the issue fixes (acceptance checks query these names): every table
// and its columns in order. The two dialects must both produce exactly this.
var wantSchema = schema{
	"vouchers":         {"id", "title", "sub_title", "rules", "pay_value", "actual_value", "status", "created_at", "updated_at"},
	"seckill_vouchers": {"voucher_id", "stock", "begin_time", "end_time", "created_at", "updated_at"},
	"voucher_orders":   {"id", "user_id", "voucher_id", "status", "created_at", "updated_at"},
	// lock.MySQLLocks' table; the name is its primary key.
	"distributed_locks": {"name", "owner", "holds", "version", "expires_at", "attempt"},
	// order.SQLStore's fences: the largest fencing token admitted per lock name.
	"lock_fences": {"name", "token", "claims", "claimed_at"},
	// async.Store's failed orders: the ones the stream writer dead-lettered.
	"async_failed_orders": {"order_id", "user_id", "voucher_id", "reason", "unit", "created_at"},
}

// schema maps each table (goose's own left out) to its columns in order.
type schema map[string][]string

// index is a secondary index as both dialects can report it.
type index struct {
	Table   string
	Unique  bool
	Columns string // comma-separated, in index order
}

func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := database.OpenSQLite(context.Background(), t.TempDir(), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	return sqlDB
}

func migrationFiles(t *testing.T, dialect migrations.Dialect) []string {
	t.Helper()
	entries, err := os.ReadDir(string(dialect))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".sql" {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestSameVersions checks that every migration exists in both dialects under the same name.
func TestSameVersions(t *testing.T) {
	mysql, sqlite := migrationFiles(t, migrations.MySQL), migrationFiles(t, migrations.SQLite)
	require.NotEmpty(t, mysql)
	assert.Equal(t, mysql, sqlite, "migrations/mysql and migrations/sqlite must hold the same versions")
}

// upTwice applies the migrations, then again: the second run must apply nothing.
func upTwice(t *testing.T, db *sql.DB, dialect migrations.Dialect) {
	t.Helper()
	ctx := context.Background()
	n, err := migrations.Up(ctx, db, dialect)
	require.NoError(t, err)
	assert.Equal(t, len(migrationFiles(t, dialect)), n, "migrations applied to an empty database")
	n, err = migrations.Up(ctx, db, dialect)
	require.NoError(t, err, "second run")
	assert.Zero(t, n, "second run applied migrations again")
}

func TestUpSQLite(t *testing.T) {
	db := openSQLite(t)
	upTwice(t, db, migrations.SQLite)
	assert.Equal(t, wantSchema, sqliteSchema(t, db))
	assert.ElementsMatch(t, wantIndexes, sqliteIndexes(t, db))
}

func TestUpUnknownDialect(t *testing.T) {
	_, err := migrations.Up(context.Background(), openSQLite(t), "postgres")
	require.ErrorContains(t, err, `unknown dialect "postgres"`)
}

// wantIndexes are the secondary indexes: uk_user_voucher, the last line of defence for one
// order per user and, voucher first, the index that covers the reads of a voucher's orders
// (migration 00008), and the one behind reconcile's count of a retired voucher's kept units.
var wantIndexes = []index{
	{Table: "voucher_orders", Unique: true, Columns: "voucher_id,user_id"},
	{Table: "async_failed_orders", Unique: false, Columns: "voucher_id"},
}

func sqliteSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{}
	for _, table := range sqliteStrings(t, db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'goose_db_version'") {
		s[table] = sqliteStrings(t, db, "SELECT name FROM pragma_table_info(?) ORDER BY cid", table)
	}
	return s
}

// sqliteIndexes lists the indexes that are not the primary key, from pragma index_list.
func sqliteIndexes(t *testing.T, db *sql.DB) []index {
	t.Helper()
	var out []index
	for table := range wantSchema {
		rows, err := db.Query("SELECT name, \"unique\", origin FROM pragma_index_list(?)", table)
		require.NoError(t, err)
		type idx struct {
			name, origin string
			unique       bool
		}
		var idxs []idx
		for rows.Next() {
			var i idx
			require.NoError(t, rows.Scan(&i.name, &i.unique, &i.origin))
			idxs = append(idxs, i)
		}
		require.NoError(t, rows.Err())
		_ = rows.Close()
		for _, i := range idxs {
			if i.origin == "pk" {
				continue
			}
			cols := sqliteStrings(t, db, "SELECT name FROM pragma_index_info(?) ORDER BY seqno", i.name)
			out = append(out, index{Table: table, Unique: i.unique, Columns: strings.Join(cols, ",")})
		}
	}
	return out
}

func sqliteStrings(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// sorted returns the indexes in a stable order for comparison.
func sorted(idx []index) []index {
	out := slices.Clone(idx)
	slices.SortFunc(out, func(a, b index) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(a.Columns, b.Columns))
	})
	return out
}
