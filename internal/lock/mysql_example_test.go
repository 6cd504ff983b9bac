package lock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
)

func ExampleMySQLLocks() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mysqllock-example")
	defer os.RemoveAll(dir)
	db, err := database.OpenSQLite(ctx, dir, database.Pool{}) // or database.OpenMySQL
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil { // creates distributed_locks
		panic(err)
	}
	sqlDB, _ := db.DB.DB()

	a := lock.NewMySQLLocks(sqlDB, lock.SQLDialect(db.Dialect), lock.NewProcessID(), lock.MySQLLockOptions{})
	b := lock.NewMySQLLocks(sqlDB, lock.SQLDialect(db.Dialect), lock.NewProcessID(), lock.MySQLLockOptions{}) // another process
	l := a.MySQLLock("order:user:42")
	ok, _ := l.TryLock(ctx, 10*time.Second)
	fmt.Println("taken:", ok, "token:", l.Token())
	ok, _ = l.TryLock(ctx, 10*time.Second)
	fmt.Println("re-entered:", ok, "token:", l.Token())
	other := b.MySQLLock("order:user:42")
	ok, _ = other.TryLockWait(ctx, 50*time.Millisecond, 10*time.Second)
	fmt.Println("another process, after waiting 50ms:", ok)
	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx)
	ok, _ = other.TryLock(ctx, 10*time.Second)
	fmt.Println("another process, after release:", ok, "token:", other.Token())
	// Output:
	// taken: true token: 1
	// re-entered: true token: 1
	// another process, after waiting 50ms: false
	// another process, after release: true token: 2
}
