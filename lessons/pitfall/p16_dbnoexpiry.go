package pitfall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/migrations"
)

// Pitfall 16 — the database lock without expiry: a table with a unique index on the method
// name, INSERT to lock, DELETE to unlock. A holder that dies between the two leaves its row,
// and nobody gets the lock again (no expiry: the lock's "no dead lock" property is lost). The
// fix is lock.MySQLLock: the row carries its expiry, and an expired row passes to the next
// owner through one conditional UPDATE (… WHERE name = ? AND expires_at < now), which the
// database runs atomically. Not a sweeper job that reads which rows have expired and deletes
// them afterwards: between its read and its DELETE the row may have passed to a new holder,
// whose live lock the DELETE then removes without a word to it.
var dbNoExpiry = &Pitfall{
	Num: "16", Name: "db-no-expiry", Title: "A database lock row left by a crashed holder",
	Source: "004 基于数据库的实现方式, problem 3 (没有锁失效机制: the row of a holder that crashed stays forever)",
	Story: "The article's table lock: `INSERT INTO method_lock (method_name) …` takes the lock (the unique index " +
		"refuses a second row), `DELETE … WHERE method_name = …` releases it. A inserts its row and crashes " +
		"before the DELETE. The row has no expiry: however long B waits, its INSERT hits the unique index, and " +
		"the lock is dead until someone deletes the row by hand.",
	Remedy: "`lock.MySQLLock` (`distributed_locks`, created by the migrations): the row records its owner and " +
		"`expires_at`, written with the database's own clock. Once A's lease has run out, B takes the row over " +
		"with one conditional UPDATE (`… WHERE name = ? AND (owner = '' OR expires_at < now)`), which the " +
		"database runs atomically, so of many contenders exactly one wins, and the row's version, B's fencing " +
		"token, grows from 1 to 2. The article's own suggestion, a job that deletes timed-out rows, has a race of " +
		"its own. The unique index still lets only one contender insert after a delete, but the job decides on what " +
		"it read (A's row is old) and deletes later, by name. If meanwhile another run of the job (a second " +
		"instance, or the next tick while this one stalls) has deleted A's row and B has inserted its own, the " +
		"stale DELETE removes B's live row: B is not told and works on, and C inserts and gets in beside it. The " +
		"takeover never deletes: its UPDATE checks the expiry and changes the owner in one statement. Runs on the " +
		"embedded SQLite here, and on MariaDB in `make test-integration`.",
	Variants:   wrongFix("INSERT into method_lock / DELETE (no expiry)", "lock.MySQLLock (expires_at, conditional UPDATE takeover)"),
	ownBackend: true,
	play:       playDBNoExpiry,
	judge:      livenessVerdict(rowStaysReason),
}

// dbLease is the lesson's lease: the database's clock is real time, so it is short, and the
// script waits until the database itself says the row has expired.
const dbLease = 200 * time.Millisecond

// lessonDB is the lesson's database: a fresh embedded SQLite, or the MySQL/MariaDB of
// Env.MySQLDSN, migrated.
type lessonDB struct {
	db      *sql.DB
	dialect migrations.Dialect
	close   func() error
}

func openLessonDB(ctx context.Context, env Env) (*lessonDB, error) {
	var d *database.DB
	var err error
	dir := ""
	if env.MySQLDSN != "" {
		d, err = database.OpenMySQL(ctx, env.MySQLDSN, database.Pool{})
	} else {
		if dir, err = os.MkdirTemp("", "seckill-pitfall-db-"); err != nil {
			return nil, err
		}
		d, err = database.OpenSQLite(ctx, dir, database.Pool{})
	}
	if err != nil {
		return nil, err
	}
	raw, err := d.DB.DB()
	if err == nil {
		_, err = d.Migrate(ctx)
	}
	if err == nil {
		_, err = raw.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS method_lock (
	method_name VARCHAR(64) NOT NULL,
	owner VARCHAR(255) NOT NULL,
	PRIMARY KEY (method_name))`)
	}
	closeAll := func() error {
		err := d.Close()
		if dir != "" {
			err = errors.Join(err, os.RemoveAll(dir))
		}
		return err
	}
	if err != nil {
		return nil, errors.Join(err, closeAll())
	}
	return &lessonDB{db: raw, dialect: d.Dialect, close: closeAll}, nil
}

// nowSQL is the database's clock, in the format the lock's expires_at is compared with.
func (d *lessonDB) nowSQL() string {
	if d.dialect == migrations.SQLite {
		return "strftime('%Y-%m-%d %H:%M:%f', 'now')"
	}
	return "UTC_TIMESTAMP(6)"
}

// methodLock is the article's table lock: INSERT to take it, DELETE to release it, no
// owner check and no expiry.
type methodLock struct {
	db    *sql.DB
	a     *Actor
	name  string
	owner string
}

func (l methodLock) TryLock(ctx context.Context, _ time.Duration) (bool, error) {
	q := "INSERT INTO method_lock (method_name, owner) VALUES (?, ?)"
	what := fmt.Sprintf("INSERT INTO method_lock (method_name, owner) VALUES ('%s', '%s')", l.name, l.owner)
	_, err := l.db.ExecContext(ctx, q, l.name, l.owner)
	switch {
	case err == nil:
		l.a.Did("DB", what, "1 row", l.a.Name+" takes the lock")
		return true, nil
	case database.IsUniqueViolation(err, "PRIMARY", "method_name"):
		l.a.Refused("DB", what, "duplicate key")
		return false, nil
	}
	return false, err
}

func (l methodLock) Unlock(ctx context.Context) error {
	_, err := l.db.ExecContext(ctx, "DELETE FROM method_lock WHERE method_name = ?", l.name)
	l.a.Did("DB", fmt.Sprintf("DELETE FROM method_lock WHERE method_name = '%s'", l.name), "1 row", l.a.Name+" releases its lock")
	return err
}

// tableLock records the calls to lock.MySQLLock with the statement each one amounts to.
type tableLock struct {
	l *lock.MySQLLock
	a *Actor
}

func (t tableLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	ok, err := t.l.TryLock(ctx, lease)
	what := fmt.Sprintf("TryLock %s: UPDATE distributed_locks … WHERE name = '%s' AND (owner = '' OR expires_at < now), else INSERT (lease %s)", t.l.Name(), t.l.Name(), lease)
	switch {
	case err != nil:
		t.a.Did("DB", what, "error: "+err.Error(), "")
	case ok:
		t.a.Did("DB", what, fmt.Sprintf("true, version %d (the fencing token)", t.l.Token()), t.a.Name+" takes the lock")
	default:
		t.a.Refused("DB", what, "false")
	}
	return ok, err
}

func (t tableLock) Unlock(ctx context.Context) error {
	err := t.l.Unlock(ctx)
	reply := "ok"
	if err != nil {
		reply = "error: " + err.Error()
	}
	t.a.Did("DB", "Unlock "+t.l.Name()+": UPDATE distributed_locks SET owner = '' … WHERE name = ? AND owner = ?", reply, t.a.Name+" releases its lock")
	return err
}

func playDBNoExpiry(s *Scene, v Variant) error {
	d, err := openLessonDB(s.ctx, s.env)
	if err != nil {
		return fmt.Errorf("open the lesson's database: %w", err)
	}
	s.teardown = append(s.teardown, d.close)
	if s.env.MySQLDSN != "" {
		s.ns = "pitfall" + randomHex(4) + ":" // a shared database: names of this run only
	}
	name := s.LockName("order:1")
	locks := func(process string) *lock.MySQLLocks {
		return lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), process, lock.MySQLLockOptions{})
	}
	mk := func(a *Actor) lock.Lock {
		if v.Wrong {
			return methodLock{db: d.db, a: a, name: name, owner: a.Process}
		}
		return tableLock{l: locks(a.Process).MySQLLock(name), a: a}
	}
	s.Go("A", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), dbLease) }, WithProcess("app1"))
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), dbLease) }, WithProcess("app2"))
	if !s.Until("A", "working") {
		return errNoPoint("A", "working")
	}
	s.Crash("A")
	if err := s.observeRow(d, name); err != nil {
		return err
	}
	if err := s.waitRowLease(d, name, v.Wrong); err != nil {
		return err
	}
	s.Finish("B")
	return s.observeRow(d, name)
}

// waitRowLease lets the lease of name's row run out: until the database's own clock is past
// expires_at (a condition polled on the database, not a guessed sleep). The article's table
// has no expiry: no wait would help, as p02's key without a TTL, so none is made.
func (s *Scene) waitRowLease(d *lessonDB, name string, noExpiry bool) error {
	if noExpiry {
		s.Note("time passes: method_lock has no expiry column, so no amount of waiting frees the row")
		return nil
	}
	err := poll(s.ctx, 10*time.Second, func() (bool, error) {
		var n int
		err := d.db.QueryRowContext(s.ctx, "SELECT COUNT(*) FROM distributed_locks WHERE name = ? AND expires_at < "+d.nowSQL(), name).Scan(&n)
		return n == 1, err
	})
	if err != nil {
		return err
	}
	s.Note("time passes: A's lease runs out (expires_at < now, on the database's clock)")
	return nil
}

// observeRow records name's row, in whichever table holds it, as the script sees it.
func (s *Scene) observeRow(d *lessonDB, name string) error {
	var owner, extra string
	err := d.db.QueryRowContext(s.ctx, "SELECT owner FROM method_lock WHERE method_name = ?", name).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		// Not whether it has expired: the lease is real time, and the timeline must not
		// depend on how fast the script ran.
		var holds, version int
		err = d.db.QueryRowContext(s.ctx, "SELECT owner, holds, version FROM distributed_locks WHERE name = ?", name).
			Scan(&owner, &holds, &version)
		if errors.Is(err, sql.ErrNoRows) {
			s.Note("in the database, no row for %s", name)
			return nil
		}
		extra = fmt.Sprintf(", holds %d, version %d", holds, version)
	}
	if err != nil {
		return fmt.Errorf("read the row of %s: %w", name, err)
	}
	if owner == "" {
		owner = "none"
	}
	s.Note("in the database, the row for %s: owner %s%s", name, owner, extra)
	return nil
}

// rowStaysReason explains a refusal by the table lock without expiry.
func rowStaysReason(events []Event) string {
	if e, ok := firstEvent(events, func(e Event) bool { return strings.Contains(e.What, "no expiry column") }); ok {
		return fmt.Sprintf("the row has no expiry (t=%d), so nobody will ever get the lock again", e.T)
	}
	return ""
}
