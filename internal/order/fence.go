package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seckill/seckill/migrations"
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

// fenceSQL is one dialect's statements on lock_fences: the claim (claimFence) and the
// pruning of rows nobody claims any more (PruneFences).
type fenceSQL struct {
	// claim creates the name's row with the token, or admits a token at least as large as
	// the row's. An equal token is the same grant (a holder's second write, a re-entry, a
	// LocalRemoteLock's local handoff); only a lower one is a holder whose lock has since
	// been granted again. It reports one or more affected rows when it admitted the token and
	// none when it refused it. claims changes with every admission because MySQL reports
	// changed rows, not matched ones: without it a claim at the row's own token would look
	// refused. On MySQL token is assigned last: the assignments before it still see the row's
	// value. A duplicate primary key locks just that row, no gap, so a claim inside the
	// order's transaction blocks no other name's. An admitted claim also sets claimed_at, on
	// the database's clock. Arguments: name, token.
	claim string
	// selectOld names rows whose claimed_at is older than the cutoff (arguments: cutoff,
	// limit); deleteOld, with "(?, …)" appended, deletes those of the names that are still
	// that old (arguments: cutoff, names…). Both compute the cutoff on the database's clock,
	// the clock the claims wrote, from what cutoff returns.
	selectOld, deleteOld string
	cutoff               func(retention time.Duration) any
}

// MySQL's claim reads the proposed row with VALUES(), which MySQL 8.0.20 deprecates (with a
// warning, still supported) in favour of a row alias (INSERT … AS new …) that MariaDB does not
// parse; VALUES() is the form both servers run.
var fenceStatements = map[migrations.Dialect]fenceSQL{
	migrations.MySQL: {
		claim: "INSERT INTO lock_fences (name, token, claims, claimed_at) VALUES (?, ?, 1, UTC_TIMESTAMP(3)) " +
			"ON DUPLICATE KEY UPDATE claims = IF(token <= VALUES(token), claims + 1, claims), " +
			"claimed_at = IF(token <= VALUES(token), VALUES(claimed_at), claimed_at), token = GREATEST(token, VALUES(token))",
		selectOld: "SELECT name FROM lock_fences WHERE claimed_at < UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND LIMIT ?",
		deleteOld: "DELETE FROM lock_fences WHERE claimed_at < UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND AND name IN ",
		cutoff:    func(d time.Duration) any { return d.Microseconds() },
	},
	migrations.SQLite: {
		claim: "INSERT INTO lock_fences (name, token, claims, claimed_at) VALUES (?, ?, 1, strftime('%Y-%m-%d %H:%M:%f', 'now')) " +
			"ON CONFLICT (name) DO UPDATE SET claims = claims + 1, token = excluded.token, claimed_at = excluded.claimed_at " +
			"WHERE lock_fences.token <= excluded.token",
		selectOld: "SELECT name FROM lock_fences WHERE claimed_at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?) LIMIT ?",
		deleteOld: "DELETE FROM lock_fences WHERE claimed_at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?) AND name IN ",
		cutoff: func(d time.Duration) any { // a strftime modifier: "-86400.000000 seconds"
			return "-" + strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + " seconds"
		},
	},
}

// execer is what claimFence writes through: a pool or the order's connection.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// claimFence presents f to the store through db with claim (fenceSQL.claim), in one round
// trip: through a pool the claim commits at once; inside a
// transaction it holds the row until the transaction ends, so no newer holder can claim in
// between. It returns ErrFenced when the row holds a larger token.
func claimFence(ctx context.Context, db execer, claim string, f Fence) error {
	if f.Token == 0 {
		return nil
	}
	res, err := db.ExecContext(ctx, claim, f.Name, f.Token)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	switch {
	case err != nil:
		return fmt.Errorf("claim fence: %w", err)
	case n == 0:
		return ErrFenced
	}
	return nil
}
