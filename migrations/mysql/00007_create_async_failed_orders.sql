-- +goose Up
-- The asynchronous mode's failed orders (internal/async): one row per order the stream writer
-- gave up (dead-lettered), written when it is dead-lettered and again, idempotently, from the
-- voucher's dead-letter stream before the voucher's Redis keys are retired
-- (SECKILL_STREAM_RETENTION). GET /api/orders/{id} answers `failed` from here once Redis no
-- longer holds the order's status, and reconcile counts a retired voucher's kept units here.
-- unit is what became of the order's reserved unit: returned, kept or none (async_dead.lua).
CREATE TABLE async_failed_orders (
    order_id   BIGINT UNSIGNED NOT NULL,
    user_id    BIGINT UNSIGNED NOT NULL,
    voucher_id BIGINT UNSIGNED NOT NULL,
    reason     TEXT            NOT NULL COMMENT 'why the database refused the order',
    unit       VARCHAR(16)     NOT NULL COMMENT 'returned, kept or none',
    created_at DATETIME(3)     NOT NULL COMMENT 'when it was admitted, UTC',
    PRIMARY KEY (order_id),
    KEY idx_failed_voucher (voucher_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE async_failed_orders;
