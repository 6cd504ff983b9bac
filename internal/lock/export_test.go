package lock

// Owner exposes owner to the external tests, which check the value a SimpleRedisLock writes.
var Owner = owner
