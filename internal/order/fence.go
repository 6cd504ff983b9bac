package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill/seckill/internal/database"
)

// ErrFenced is returned when an order's write presented a fencing token lower than one a
// newer holder of the same lock has already presented: the order's lock had expired (or was
// otherwise lost) and passed to another request of the user, so the write was refused and
// nothing was written.
var ErrFenced = errors.New("order: lock expired: a newer holder of the user's lock fenced this order off")

// Fence is what an order's write presents to the store when orders are fenced: the fencing
// token the order's lock was granted with (Kleppmann's fencing token) and the name of the
// lock_fences row that remembers the largest token presented so far.
type Fence struct {
	// Name is the row: the token source (the lock kind) and the lock's name, for tokens of
	// different sequences must never be compared.
	Name string
	// Token is the lock's token; 0 means the order is not fenced.
	Token int64
}

// fenceName is the lock_fences row of lock name under token source.
func fenceName(source, lock string) string { return source + "/" + lock }

// claimFenceSQL admits a token at least as large as the row's. An equal token is the same
// grant (a holder's second write, a re-entry, a LocalRemoteLock's local handoff); only a
// lower one is a holder whose lock has since been granted again. claims changes with every
// admission because MySQL reports changed rows, not matched ones: without it a claim at the
// row's own token would look refused.
const claimFenceSQL = "UPDATE lock_fences SET token = ?, claims = claims + 1 WHERE name = ? AND token <= ?"

// execer is what claimFence writes through: a pool or the order's connection.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// claimFence presents f to the store through db: a pool (the claim commits at once) or a
// transaction (the claim holds the row until the transaction ends, so no newer holder can
// claim in between). It returns ErrFenced when the row holds a larger token. A name without
// a row gets one; when a concurrent claim inserts it first (the primary key refuses ours, on
// MariaDB, MySQL and SQLite alike), the claim is compared with the row that won.
func claimFence(ctx context.Context, db execer, f Fence) error {
	if f.Token == 0 {
		return nil
	}
	for inserted := false; ; inserted = true {
		res, err := db.ExecContext(ctx, claimFenceSQL, f.Token, f.Name, f.Token)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err != nil:
			return fmt.Errorf("claim fence: %w", err)
		case n == 1:
			return nil
		case inserted:
			return ErrFenced
		}
		_, err = db.ExecContext(ctx, "INSERT INTO lock_fences (name, token, claims) VALUES (?, ?, 1)", f.Name, f.Token)
		switch {
		case err == nil:
			return nil
		case !database.IsUniqueViolation(err, "PRIMARY", "lock_fences.name"):
			return fmt.Errorf("claim fence: %w", err)
		}
	}
}
