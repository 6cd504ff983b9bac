package lock

import (
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

// The scripts of the waiting locks, each wrapped once: Run sends EVALSHA and falls back to
// EVAL the first time a server lacks the script.
var (
	reentrantLockScript   = redis.NewScript(lua.ReentrantLock)
	reentrantUnlockScript = redis.NewScript(lua.ReentrantUnlock)
	renewScript           = redis.NewScript(lua.Renew)

	fairLockScript     = redis.NewScript(lua.FairLock)
	fairUnlockScript   = redis.NewScript(lua.FairUnlock)
	fairWithdrawScript = redis.NewScript(lua.FairWithdraw)

	registryObtainScript  = redis.NewScript(lua.RegistryObtain)
	registryReleaseScript = redis.NewScript(lua.RegistryRelease)
	registryExtendScript  = redis.NewScript(lua.RegistryExtend)
)

// fenceTTLArg is fenceCounterTTL in milliseconds, the scripts' argument, boxed once: an int64
// passed as an argument is boxed (allocated) at every call.
var fenceTTLArg any = fenceCounterTTL.Milliseconds()
