-- +goose Up
-- When each fence row last admitted a claim, so that rows of names nobody has locked for a
-- long time can be deleted (order.SQLStore.PruneFences, SECKILL_FENCE_RETENTION): in the
-- service a name is a user, and without this every user who ever ordered would keep a row.
-- UTC, written with the database's clock (UTC_TIMESTAMP(3)); rows there before this migration
-- start at its time. (An expression default: MariaDB 10.2.1+, MySQL 8.0.13+.)
ALTER TABLE lock_fences
    ADD COLUMN claimed_at DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)) COMMENT 'last admitted claim, UTC';

-- +goose Down
ALTER TABLE lock_fences DROP COLUMN claimed_at;
