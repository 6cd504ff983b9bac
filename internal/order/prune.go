package order

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// PruneFences deletes the lock_fences rows that admitted no claim for retention, batch rows
// at a time, and returns how many it deleted. Each round reads the names of old rows (a
// plain read, which locks nothing) and deletes those rows by their primary key, checking
// their age again, so that a row claimed in between stays and no order waits on a scan.
//
// A row is what refuses a holder whose lock has passed on, so it may go only when no such
// holder can still write: every order claims its row when its lock is granted and ends
// within its deadline (Config.Timeout, seconds), so a row unclaimed for far longer than that
// (SECKILL_FENCE_RETENTION, a day by default) has no order left that it could fence. The
// next grant of the name claims a fresh row; its token is larger than every earlier one
// anyway, since the locks' counters only grow (or start again from the clock).
//
// claimed_at has no index, on purpose: every order's claim rewrites it, and an index would
// add its upkeep to the hot path of every order, where the read it would speed up runs once
// a round (pruneEvery: at most hourly per instance). The price is that a round whose first
// read finds few old rows scans the whole table: 0.8 s for 2 million rows on MariaDB 10.11
// (2 vCPU, warm buffer pool; measured 2026-11-26), once an hour per instance. A service with
// far more rows or instances than that would add the index or run the janitor on one
// instance only.
func (s *SQLStore) PruneFences(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	q := s.fences
	if retention <= 0 || batch <= 0 {
		return 0, fmt.Errorf("prune fences: want a positive retention and batch, got %v and %d", retention, batch)
	}
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return 0, fmt.Errorf("prune fences: %w", err)
	}
	cutoff := q.cutoff(retention)
	var deleted int64
	for {
		rows, err := sqlDB.QueryContext(ctx, q.selectOld, cutoff, batch)
		if err != nil {
			return deleted, fmt.Errorf("prune fences: %w", err)
		}
		args := []any{cutoff}
		for rows.Next() {
			var name string // a string: SQLite never finds a BLOB equal to the TEXT it came from
			if err := rows.Scan(&name); err != nil {
				_ = rows.Close()
				return deleted, fmt.Errorf("prune fences: %w", err)
			}
			args = append(args, name)
		}
		if err := rows.Err(); err != nil {
			_ = rows.Close()
			return deleted, fmt.Errorf("prune fences: %w", err)
		}
		if err := rows.Close(); err != nil {
			return deleted, fmt.Errorf("prune fences: %w", err)
		}
		found := len(args) - 1
		if found == 0 {
			return deleted, nil
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?, ", found), ", ") + ")"
		res, err := sqlDB.ExecContext(ctx, q.deleteOld+in, args...)
		if err != nil {
			return deleted, fmt.Errorf("prune fences: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return deleted, fmt.Errorf("prune fences: %w", err)
		}
		deleted += n
		if found < batch || n == 0 {
			// The last batch, or none of it could go (claimed again in between): stop rather
			// than read the same rows again; the next round finds what is left.
			return deleted, nil
		}
	}
}
