-- +goose Up
-- The embedded store's copy of migrations/mysql/00008: uk_user_voucher on (voucher_id, user_id),
-- which with the rowid (the id) covers the reads by voucher, and no idx_voucher. SQLite cannot
-- drop a table constraint, so the table is rebuilt with it (nothing references it).
CREATE TABLE voucher_orders_new (
    id         INTEGER  NOT NULL PRIMARY KEY,
    user_id    INTEGER  NOT NULL,
    voucher_id INTEGER  NOT NULL,
    status     INTEGER  NOT NULL DEFAULT 1,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    CONSTRAINT uk_user_voucher UNIQUE (voucher_id, user_id)
);
INSERT INTO voucher_orders_new SELECT id, user_id, voucher_id, status, created_at, updated_at FROM voucher_orders;
DROP TABLE voucher_orders;
ALTER TABLE voucher_orders_new RENAME TO voucher_orders;

-- +goose Down
CREATE TABLE voucher_orders_old (
    id         INTEGER  NOT NULL PRIMARY KEY,
    user_id    INTEGER  NOT NULL,
    voucher_id INTEGER  NOT NULL,
    status     INTEGER  NOT NULL DEFAULT 1,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    CONSTRAINT uk_user_voucher UNIQUE (user_id, voucher_id)
);
INSERT INTO voucher_orders_old SELECT id, user_id, voucher_id, status, created_at, updated_at FROM voucher_orders;
DROP TABLE voucher_orders;
ALTER TABLE voucher_orders_old RENAME TO voucher_orders;
CREATE INDEX idx_voucher ON voucher_orders (voucher_id);
