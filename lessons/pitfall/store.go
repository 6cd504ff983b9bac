package pitfall

import (
	"fmt"
	"sync"
)

// OrderDB is the smallest honest model of the voucher_orders table for the pitfalls that
// need a database (1 and 8): transactions whose writes other transactions see only after
// COMMIT (read committed), and no unique key on (user_id, voucher_id), as in hmdp's
// tb_voucher_order, so that only the lock stands between a user and a second order. (The
// service's real schema adds uk_user_voucher as a last line of defence.)
type OrderDB struct {
	mu        sync.Mutex
	committed map[int]int // user → orders
	nextTx    int
}

// NewOrderDB returns an empty table.
func NewOrderDB() *OrderDB { return &OrderDB{committed: make(map[int]int)} }

// Orders returns the committed orders of user.
func (d *OrderDB) Orders(user int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.committed[user]
}

// Tx is one transaction of an actor.
type Tx struct {
	db      *OrderDB
	a       *Actor
	id      int
	pending map[int]int
}

// Begin starts a transaction for a.
func (d *OrderDB) Begin(a *Actor) *Tx {
	d.mu.Lock()
	d.nextTx++
	id := d.nextTx
	d.mu.Unlock()
	a.Did("DB", "BEGIN", "", fmt.Sprintf("transaction %d", id))
	return &Tx{db: d, a: a, id: id, pending: make(map[int]int)}
}

// CountOrders is hmdp's one-order-per-user check: committed rows plus this transaction's own.
func (t *Tx) CountOrders(user int) int {
	t.db.mu.Lock()
	n := t.db.committed[user] + t.pending[user]
	t.db.mu.Unlock()
	t.a.Did("DB", fmt.Sprintf("SELECT COUNT(*) FROM voucher_orders WHERE user_id=%d", user), fmt.Sprint(n), "")
	return n
}

// InsertOrder adds an order for user, visible to others after Commit.
func (t *Tx) InsertOrder(user int) {
	t.pending[user]++
	t.a.Did("DB", fmt.Sprintf("INSERT INTO voucher_orders (user_id) VALUES (%d)", user), "1 row", "not visible to others until COMMIT")
}

// Commit makes the transaction's rows visible.
func (t *Tx) Commit() {
	t.db.mu.Lock()
	for u, n := range t.pending {
		t.db.committed[u] += n
	}
	t.db.mu.Unlock()
	t.a.Did("DB", "COMMIT", "OK", fmt.Sprintf("transaction %d visible", t.id))
}

// Storage is the resource a lock protects in pitfall 7: a counter that clients increment by
// read-modify-write inside the critical section. It can check fencing tokens: a write that
// carries a token smaller than one it has already seen is rejected.
type Storage struct {
	mu       sync.Mutex
	value    int
	accepted int   // writes accepted
	highest  int64 // highest fencing token seen
}

// Read returns the counter.
func (st *Storage) Read(a *Actor) int {
	st.mu.Lock()
	v := st.value
	st.mu.Unlock()
	a.Did("Storage", "read counter", fmt.Sprint(v), "")
	return v
}

// Write sets the counter to v. A token of 0 means the writer has none and is not checked;
// a positive token is checked against the highest seen.
func (st *Storage) Write(a *Actor, token int64, v int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	what := fmt.Sprintf("write counter=%d", v)
	if token > 0 {
		what += fmt.Sprintf(" (token %d)", token)
		if token < st.highest {
			a.Did("Storage", what, "rejected", fmt.Sprintf("stale token %d < %d", token, st.highest))
			return false
		}
		st.highest = token
	}
	st.value = v
	st.accepted++
	a.Did("Storage", what, "accepted", "")
	return true
}

// Counts returns the counter and the number of writes accepted: with read-modify-write
// increments they are equal unless an update was lost.
func (st *Storage) Counts() (value, accepted int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.value, st.accepted
}
