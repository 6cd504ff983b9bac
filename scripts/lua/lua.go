// Package lua embeds the project's Redis Lua scripts so that every binary carries them.
//
// The embed directive cannot reach a parent directory, so the scripts live beside this file
// and the packages that run them import this one. Each script's header names its KEYS and ARGV.
package lua

import _ "embed"

// Unlock is unlock.lua: delete KEYS[1] only if it still holds ARGV[1].
//
//go:embed unlock.lua
var Unlock string

// FenceReseed is fence_reseed.lua: a SimpleRedisLock's grant whose counter Redis lost takes a
// token from a counter started again at Redis's clock.
//
//go:embed fence_reseed.lua
var FenceReseed string

// ReentrantLock is reentrant_lock.lua: take or re-enter a ReentrantLock, else return -PTTL.
//
//go:embed reentrant_lock.lua
var ReentrantLock string

// ReentrantUnlock is reentrant_unlock.lua: release one hold; at zero delete and publish.
//
//go:embed reentrant_unlock.lua
var ReentrantUnlock string

// Renew is renew.lua: the watchdog's renewal of a hash lock the owner still holds.
//
//go:embed renew.lua
var Renew string

// FairLock is fair_lock.lua: take, re-enter or queue for a FairLock.
//
//go:embed fair_lock.lua
var FairLock string

// FairUnlock is fair_unlock.lua: release one hold; at zero hand over to the first live waiter.
//
//go:embed fair_unlock.lua
var FairUnlock string

// FairWithdraw is fair_withdraw.lua: a FairLock waiter leaves the queue.
//
//go:embed fair_withdraw.lua
var FairWithdraw string

// RegistryObtain is registry_obtain.lua: take the remote half of a LocalRemoteLock.
//
//go:embed registry_obtain.lua
var RegistryObtain string

// RegistryRelease is registry_release.lua: compare-and-delete the remote half, then publish.
//
//go:embed registry_release.lua
var RegistryRelease string

// RegistryExtend is registry_extend.lua: reset the lease of a remote half still held.
//
//go:embed registry_extend.lua
var RegistryExtend string

// NextID is next_id.lua: the next id's second and sequence, from the Redis server's clock.
//
//go:embed next_id.lua
var NextID string

// AsyncAdmit is async_admit.lua: the asynchronous mode's admission of one order or of a batch of
// one voucher's orders.
//
//go:embed async_admit.lua
var AsyncAdmit string

// AsyncLoad is async_load.lua: create a voucher's sale hash from the database's books.
//
//go:embed async_load.lua
var AsyncLoad string

// AsyncAck is async_ack.lua: acknowledge and delete written entries.
//
//go:embed async_ack.lua
var AsyncAck string

// AsyncDead is async_dead.lua: dead-letter an entry and release its reservation.
//
//go:embed async_dead.lua
var AsyncDead string

// AsyncAttempt is async_attempt.lua: count a refused attempt of an entry this consumer owns.
//
//go:embed async_attempt.lua
var AsyncAttempt string

// AsyncHeld is async_held.lua: how many of a batch's entries have left their stream.
//
//go:embed async_held.lua
var AsyncHeld string

// AsyncBooks is async_books.lua: a voucher's stock, the order ids in its stream and how many
// dead letters it has.
//
//go:embed async_books.lua
var AsyncBooks string

// AsyncGroup is async_group.lua: create a voucher's consumer group (and stream) unless the
// voucher was retired.
//
//go:embed async_group.lua
var AsyncGroup string

// AsyncRetire is async_retire.lua: delete the Redis keys of a voucher whose sale is over and
// whose stream is empty, keeping its sale hash marked retired.
//
//go:embed async_retire.lua
var AsyncRetire string

// AsyncUnregister is async_unregister.lua: delete the Redis keys of a registered voucher the
// database does not have, unless an order or a load still needs them.
//
//go:embed async_unregister.lua
var AsyncUnregister string

// AsyncSettle is async_settle.lua: settle an admission whose answer was lost, admitted or void.
//
//go:embed async_settle.lua
var AsyncSettle string
