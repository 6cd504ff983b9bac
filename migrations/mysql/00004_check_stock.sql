-- +goose Up
-- Stock never goes below zero, whatever a statement does: the order's transaction takes one
-- from stock and commits in one round trip (order.SQLStore), so the voucher's row, which every
-- order of the voucher updates, is locked only while the server runs those two statements, not
-- while the answer travels to the service and a COMMIT comes back. A sold-out voucher's
-- update then fails this check, which stops the statements before the COMMIT, instead of
-- matching no row and letting the COMMIT write an order that took no stock. CHECK is enforced
-- from MariaDB 10.2 and MySQL 8.0.16.
ALTER TABLE seckill_vouchers ADD CONSTRAINT ck_seckill_vouchers_stock CHECK (stock >= 0);

-- +goose Down
ALTER TABLE seckill_vouchers DROP CONSTRAINT ck_seckill_vouchers_stock;
