//go:build integration

package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

func openMySQL(t *testing.T) *sql.DB {
	t.Helper()
	db, err := database.OpenMySQL(context.Background(), testenv.MySQLDSN(t), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	return sqlDB
}

func TestUpMySQL(t *testing.T) {
	db := openMySQL(t)
	upTwice(t, db, migrations.MySQL)
	assert.Equal(t, wantSchema, mysqlSchema(t, db))

	// The unique key carries its name on MySQL: order.SQLStore recognises it by that name.
	var cols string
	require.NoError(t, db.QueryRow(`SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'voucher_orders' AND index_name = 'uk_user_voucher' AND non_unique = 0`).Scan(&cols))
	assert.Equal(t, "voucher_id,user_id", cols, "uk_user_voucher")
	assert.ElementsMatch(t, wantIndexes, mysqlIndexes(t, db))
}

// TestSchemaParity applies both dialects' migrations and compares what the databases report:
// the same tables, the same columns in the same order, the same secondary indexes.
func TestSchemaParity(t *testing.T) {
	mysql, sqlite := openMySQL(t), openSQLite(t)
	_, err := migrations.Up(context.Background(), mysql, migrations.MySQL)
	require.NoError(t, err)
	_, err = migrations.Up(context.Background(), sqlite, migrations.SQLite)
	require.NoError(t, err)

	assert.Equal(t, mysqlSchema(t, mysql), sqliteSchema(t, sqlite), "columns: mysql vs sqlite")
	assert.Equal(t, sorted(mysqlIndexes(t, mysql)), sorted(sqliteIndexes(t, sqlite)), "indexes: mysql vs sqlite")
}

func mysqlSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	rows, err := db.Query(`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name != 'goose_db_version' ORDER BY table_name, ordinal_position`)
	require.NoError(t, err)
	defer rows.Close()
	s := schema{}
	for rows.Next() {
		var table, column string
		require.NoError(t, rows.Scan(&table, &column))
		s[table] = append(s[table], column)
	}
	require.NoError(t, rows.Err())
	return s
}

// mysqlIndexes lists the indexes other than PRIMARY, from information_schema.statistics.
func mysqlIndexes(t *testing.T, db *sql.DB) []index {
	t.Helper()
	rows, err := db.Query(`SELECT table_name, non_unique = 0, GROUP_CONCAT(column_name ORDER BY seq_in_index)
		FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name != 'goose_db_version' AND index_name != 'PRIMARY'
		GROUP BY table_name, index_name, non_unique`)
	require.NoError(t, err)
	defer rows.Close()
	var out []index
	for rows.Next() {
		var i index
		require.NoError(t, rows.Scan(&i.Table, &i.Unique, &i.Columns))
		out = append(out, i)
	}
	require.NoError(t, rows.Err())
	return out
}
