-- +goose Up
-- The MySQL table lock (lock.MySQLLocks): one row per lock name, the classic database lock
-- whose unique index on the name (here the primary key) lets exactly one INSERT win, plus
-- the owner (process id + goroutine id) and hold count of the holder, an expiry after which
-- another owner may take the row over, and a version that grows with every grant: the
-- fencing token. A released row stays (owner empty) so that the version keeps growing.
-- Names and owners are binary: they compare byte for byte, never case- or pad-insensitively.
-- expires_at is UTC on the database server's clock (UTC_TIMESTAMP(6)).
CREATE TABLE distributed_locks (
    name       VARBINARY(255) NOT NULL,
    owner      VARBINARY(64)  NOT NULL DEFAULT '' COMMENT 'process id-goroutine id of the holder; empty when free',
    holds      INT            NOT NULL DEFAULT 0 COMMENT 'how many times the owner holds it (reentrancy)',
    version    BIGINT         NOT NULL DEFAULT 0 COMMENT 'grants of this name so far: the fencing token',
    expires_at DATETIME(6)    NOT NULL COMMENT 'UTC on the database clock; after it another owner may take the row',
    PRIMARY KEY (name)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE distributed_locks;
