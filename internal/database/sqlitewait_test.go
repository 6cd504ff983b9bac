package database_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
)

// TestSQLiteWriteWaitEndsAtDeadline: a write that finds another connection holding SQLite's
// write lock waits for it no longer than its context allows, and says why it gave up. The
// holder keeps the lock for the whole test, so the only way out for the blocked writer is its
// own bound; SQLite's busy_timeout alone held it 10 s whatever the deadline.
func TestSQLiteWriteWaitEndsAtDeadline(t *testing.T) {
	ctx := context.Background()
	db, err := database.OpenSQLite(ctx, t.TempDir(), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)

	holder := db.Begin() // BEGIN IMMEDIATE: the write lock, until Rollback
	require.NoError(t, holder.Error)
	t.Cleanup(func() { holder.Rollback() })

	// Room to get a connection before the wait on a loaded machine (a deadline that ends
	// before the wait is a plain DeadlineExceeded); far below the 10 s busy_timeout.
	const deadline = time.Second
	// Far below the 10 s busy_timeout, far above what a starved machine adds to the wait.
	const bound = deadline + 3*time.Second
	writes := map[string]func(ctx context.Context) error{
		"transaction": func(ctx context.Context) error {
			return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				return tx.Exec(insertOrder, 1, 2, 3, time.Now().UTC(), time.Now().UTC()).Error
			})
		},
		"autocommit statement": func(ctx context.Context) error {
			return db.WithContext(ctx).Exec(insertOrder, 1, 2, 3, time.Now().UTC(), time.Now().UTC()).Error
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			errc := make(chan error, 1)
			go func() { errc <- write(ctx) }()
			select {
			case err := <-errc:
				require.ErrorIs(t, err, database.ErrWriteLockBusy)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				t.Logf("gave up after %s: %v", time.Since(start).Round(time.Millisecond), err)
			case <-time.After(bound):
				t.Fatalf("a write blocked by another writer still waits %s after its %s deadline", bound-deadline, deadline)
			}
		})
	}
}

// TestSQLiteWriteWaitFollowsLongDeadline: a call whose deadline is further off than
// MaxSQLiteWriteWait may wait for the write lock until that deadline (a storm's orders on a
// starved machine queue for the one writer that long); the fixed busy_timeout cut it at 10 s.
func TestSQLiteWriteWaitFollowsLongDeadline(t *testing.T) {
	db, err := database.OpenSQLite(context.Background(), t.TempDir(), database.Pool{MaxOpen: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	long := 2 * database.MaxSQLiteWriteWait
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	var ms int64 // the bound this very call waits under
	require.NoError(t, sqlDB.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms))
	assert.Greater(t, time.Duration(ms)*time.Millisecond, database.MaxSQLiteWriteWait, "got busy_timeout %d ms under a %s deadline", ms, long)
	assert.LessOrEqual(t, time.Duration(ms)*time.Millisecond, long)

	require.NoError(t, sqlDB.QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&ms))
	assert.Equal(t, database.MaxSQLiteWriteWait, time.Duration(ms)*time.Millisecond, "without a deadline")
}
