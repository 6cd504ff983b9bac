-- +goose Up
-- The embedded store's copy of migrations/mysql/00004: stock never below zero. SQLite cannot
-- add a constraint to a table, so the table is rebuilt with it (nothing references it).
CREATE TABLE seckill_vouchers_new (
    voucher_id INTEGER  NOT NULL PRIMARY KEY REFERENCES vouchers (id) ON DELETE CASCADE,
    stock      INTEGER  NOT NULL CONSTRAINT ck_seckill_vouchers_stock CHECK (stock >= 0),
    begin_time DATETIME NOT NULL,
    end_time   DATETIME NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
INSERT INTO seckill_vouchers_new SELECT voucher_id, stock, begin_time, end_time, created_at, updated_at FROM seckill_vouchers;
DROP TABLE seckill_vouchers;
ALTER TABLE seckill_vouchers_new RENAME TO seckill_vouchers;

-- +goose Down
CREATE TABLE seckill_vouchers_old (
    voucher_id INTEGER  NOT NULL PRIMARY KEY REFERENCES vouchers (id) ON DELETE CASCADE,
    stock      INTEGER  NOT NULL,
    begin_time DATETIME NOT NULL,
    end_time   DATETIME NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
INSERT INTO seckill_vouchers_old SELECT voucher_id, stock, begin_time, end_time, created_at, updated_at FROM seckill_vouchers;
DROP TABLE seckill_vouchers;
ALTER TABLE seckill_vouchers_old RENAME TO seckill_vouchers;
