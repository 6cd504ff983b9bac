-- +goose Up
-- Vouchers as hmdp's tb_voucher carries them; money in cents. Times are UTC.
CREATE TABLE vouchers (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    title        VARCHAR(255)    NOT NULL,
    sub_title    VARCHAR(255)    NOT NULL DEFAULT '',
    rules        VARCHAR(1024)   NOT NULL DEFAULT '',
    pay_value    BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'price the user pays, in cents',
    actual_value BIGINT          NOT NULL DEFAULT 0 COMMENT 'value the voucher is worth, in cents',
    status       TINYINT         NOT NULL DEFAULT 1 COMMENT '1 on sale, 2 off the shelf, 3 expired',
    created_at   DATETIME(3)     NOT NULL,
    updated_at   DATETIME(3)     NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE seckill_vouchers (
    voucher_id BIGINT UNSIGNED NOT NULL,
    stock      INT             NOT NULL,
    begin_time DATETIME(3)     NOT NULL,
    end_time   DATETIME(3)     NOT NULL,
    created_at DATETIME(3)     NOT NULL,
    updated_at DATETIME(3)     NOT NULL,
    PRIMARY KEY (voucher_id),
    CONSTRAINT fk_seckill_voucher FOREIGN KEY (voucher_id) REFERENCES vouchers (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- id comes from the Redis ID generator, never AUTO_INCREMENT. uk_user_voucher is the last line
-- of defence for one order per user: the lock must keep duplicates from reaching it.
CREATE TABLE voucher_orders (
    id         BIGINT UNSIGNED NOT NULL,
    user_id    BIGINT UNSIGNED NOT NULL,
    voucher_id BIGINT UNSIGNED NOT NULL,
    status     TINYINT         NOT NULL DEFAULT 1 COMMENT '1 unpaid, 2 paid, 3 used, 4 cancelled, 5 refunding, 6 refunded',
    created_at DATETIME(3)     NOT NULL,
    updated_at DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_user_voucher (user_id, voucher_id),
    KEY idx_voucher (voucher_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE voucher_orders;
DROP TABLE seckill_vouchers;
DROP TABLE vouchers;
