-- +goose Up
-- The embedded store's copy of migrations/mysql/00001: same tables, columns and keys in
-- SQLite's dialect. A test applies both and compares the resulting columns.
CREATE TABLE vouchers (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    title        TEXT    NOT NULL,
    sub_title    TEXT    NOT NULL DEFAULT '',
    rules        TEXT    NOT NULL DEFAULT '',
    pay_value    INTEGER NOT NULL DEFAULT 0,
    actual_value INTEGER NOT NULL DEFAULT 0,
    status       INTEGER NOT NULL DEFAULT 1,
    created_at   DATETIME NOT NULL,
    updated_at   DATETIME NOT NULL
);

CREATE TABLE seckill_vouchers (
    voucher_id INTEGER  NOT NULL PRIMARY KEY REFERENCES vouchers (id) ON DELETE CASCADE,
    stock      INTEGER  NOT NULL,
    begin_time DATETIME NOT NULL,
    end_time   DATETIME NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);

CREATE TABLE voucher_orders (
    id         INTEGER  NOT NULL PRIMARY KEY,
    user_id    INTEGER  NOT NULL,
    voucher_id INTEGER  NOT NULL,
    status     INTEGER  NOT NULL DEFAULT 1,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    CONSTRAINT uk_user_voucher UNIQUE (user_id, voucher_id)
);
CREATE INDEX idx_voucher ON voucher_orders (voucher_id);

-- +goose Down
DROP TABLE voucher_orders;
DROP TABLE seckill_vouchers;
DROP TABLE vouchers;
