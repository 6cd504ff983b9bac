package testenv

import (
	"strings"
	"testing"
)

// ZooKeeperAddr is the ZooKeeper of the integration tests: SECKILL_TEST_ZOOKEEPER_ADDR,
// default 127.0.0.1:2181, where `scripts/services.sh up zookeeper` runs one.
func ZooKeeperAddr() string { return Getenv("SECKILL_TEST_ZOOKEEPER_ADDR", "127.0.0.1:2181") }

// EtcdAddr is the etcd of the integration tests: SECKILL_TEST_ETCD_ADDR, default
// 127.0.0.1:2379, where `scripts/services.sh up etcd` runs one.
func EtcdAddr() string { return Getenv("SECKILL_TEST_ETCD_ADDR", "127.0.0.1:2379") }

// RedLockAddrs are RedLock's nodes for the integration tests that run the service on them:
// SECKILL_TEST_REDLOCK_ADDRS (comma-separated), default the five `scripts/services.sh up`
// runs on 127.0.0.1:7001-7005.
func RedLockAddrs() []string {
	return strings.Split(Getenv("SECKILL_TEST_REDLOCK_ADDRS",
		"127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005"), ",")
}

// NeedLockServer fails t, saying how to start the servers, when err (from wiring a guard on a
// backend of its own: RedLock's nodes, ZooKeeper, etcd) is not nil. Such tests never skip.
func NeedLockServer(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v\nstart the lock servers with `scripts/services.sh up` (five Redis nodes on 127.0.0.1:7001-7005, "+
			"ZooKeeper on 127.0.0.1:2181, etcd on 127.0.0.1:2379), or point SECKILL_TEST_REDLOCK_ADDRS, SECKILL_TEST_ZOOKEEPER_ADDR "+
			"and SECKILL_TEST_ETCD_ADDR at running ones", err)
	}
}
