-- +goose Up
-- The embedded store's copy of migrations/mysql/00005. SQLite adds a column only with a
-- constant default; the rows there before start at the migration's time.
ALTER TABLE lock_fences ADD COLUMN claimed_at TEXT NOT NULL DEFAULT '1970-01-01 00:00:00.000';
UPDATE lock_fences SET claimed_at = strftime('%Y-%m-%d %H:%M:%f', 'now');

-- +goose Down
ALTER TABLE lock_fences DROP COLUMN claimed_at;
