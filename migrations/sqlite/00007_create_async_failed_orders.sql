-- +goose Up
-- The embedded store's copy of migrations/mysql/00007.
CREATE TABLE async_failed_orders (
    order_id   INTEGER  NOT NULL PRIMARY KEY,
    user_id    INTEGER  NOT NULL,
    voucher_id INTEGER  NOT NULL,
    reason     TEXT     NOT NULL,
    unit       TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);
CREATE INDEX idx_failed_voucher ON async_failed_orders (voucher_id);

-- +goose Down
DROP TABLE async_failed_orders;
