// Package async is the asynchronous order mode: admission decided in Redis by one script
// (scripts/lua/async_admit.lua) that reserves a unit and appends the order to the voucher's
// stream, and writers that read the streams as a consumer group and write the orders to the
// database in batches, acknowledging an entry only after its commit.
//
// Every Redis key of a voucher carries the hash tag {voucher:ID}, so its scripts run on Redis
// Cluster: the sale hash (stock and window), the users hash (user → order id), the orders hash
// (order id → pending or failed), the stream, the dead-letter stream and the attempts hash.
// Once a sale has been over for Config.Retention with no order left in its stream, a writer
// retires it: its dead letters are copied to the database, which then answers its failed
// orders, and its keys but the sale hash are deleted (scripts/lua/async_retire.lua).
package async

import (
	"errors"
	"strconv"
	"strings"
)

// ErrNotLoaded is returned by Service.Place's script when the voucher's sale hash is missing
// from Redis; Place then loads it from the database and tries once more.
var errNotLoaded = errors.New("async: voucher not loaded into redis")

// ErrStockShort is returned by Store.Write when the database's stock cannot cover the batch:
// the books of Redis and the database disagree, and the batch is retried one order at a time.
var ErrStockShort = errors.New("async: database stock short of the batch")

// registryKey is the set of voucher ids loaded into Redis and not retired: the streams the
// writers read and the orders hashes a status lookup asks. A voucher leaves it when a writer
// retires it (Config.Retention), so it holds the recent sales, not every sale ever. It is the
// one key outside a voucher's hash slot (with leavingKey), and no script touches it.
const registryKey = "seckill:async:vouchers"

// leavingKey is the set of vouchers a retirement is taking out of the registry: each from
// before the SREM until it is settled (back in the registry when its sale was reopened, or
// retired), so that a lookup, which reads both sets in one SUNION, never misses the orders of
// a sale reopened meanwhile. Its hash tag is the registry's name, which Redis Cluster hashes
// whole (it has no tag): the two sets share a slot, and SUNION runs there. Each retirement
// adds a member of its own (leavingMember): every instance's discovery retires a finished
// voucher, and one retirement that settled must not take the voucher out of the set while
// another is between its SREM and its put-back.
const leavingKey = "{seckill:async:vouchers}:leaving"

// leavingMember is a retirement's member of leavingKey: its voucher's id, a colon and the
// retirement's own token.
func leavingMember(voucherID int64, token string) string {
	return strconv.FormatInt(voucherID, 10) + ":" + token
}

// leavingVoucher is the voucher of a member of leavingKey or of the registry (a bare id).
func leavingVoucher(member string) (int64, error) {
	id, _, _ := strings.Cut(member, ":")
	return strconv.ParseInt(id, 10, 64)
}

// keys are the Redis keys of one voucher, all in its hash slot.
type keys struct {
	sale, users, orders, stream, dead, attempts string
}

// keysOf returns voucherID's keys.
func keysOf(voucherID int64) keys {
	p := "seckill:{voucher:" + strconv.FormatInt(voucherID, 10) + "}:"
	return keys{sale: p + "sale", users: p + "users", orders: p + "orders", stream: p + "stream",
		dead: p + "dead", attempts: p + "attempts"}
}
