-- +goose Up
-- The fence of the order write (Kleppmann's fencing token checked by the storage): one row per
-- lock name and token source, holding the largest fencing token a holder of that lock has
-- presented. An order claims its lock's row when its critical section begins and again inside
-- its write transaction, before it touches stock or orders; a token below the row's is a
-- holder whose lock has since been granted to another, and its write is refused. A row is
-- deleted only after it admitted no claim for SECKILL_FENCE_RETENTION (migration 00005). claims changes with every admitted claim: MySQL
-- reports changed rows, not matched ones, and a claim at the row's own token must count.
CREATE TABLE lock_fences (
    name   VARBINARY(255) NOT NULL COMMENT 'token source (the lock kind) / lock name',
    token  BIGINT         NOT NULL COMMENT 'largest fencing token admitted for the name',
    claims BIGINT         NOT NULL DEFAULT 0 COMMENT 'claims admitted so far',
    PRIMARY KEY (name)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE lock_fences;
