-- registry_release.lua: release the remote half of a LocalRemoteLock.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's release channel
-- ARGV[1]  process id
-- Returns 1 when the key was the process's and is deleted (an empty message on KEYS[2] wakes
-- a waiter in every subscribed process), 0 when it was gone or another process's: the lock
-- was lost to expiry while held.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[2], '')
  return 1
end
return 0
