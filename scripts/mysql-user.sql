-- The user `seckill` (password `seckill`) that the README's recipes, make test-integration and
-- make loadtest can use over TCP where root may not (a fresh MariaDB lets root in only over the
-- Unix socket): it may create, use and drop the seckill* databases, nothing else.
-- Run it through the socket: sudo mariadb < scripts/mysql-user.sql  (.ci/run does)
CREATE USER IF NOT EXISTS 'seckill'@'127.0.0.1' IDENTIFIED BY 'seckill';
CREATE USER IF NOT EXISTS 'seckill'@'localhost' IDENTIFIED BY 'seckill';
GRANT ALL PRIVILEGES ON `seckill%`.* TO 'seckill'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `seckill%`.* TO 'seckill'@'localhost';
