-- +goose Up
-- The embedded store's copy of migrations/mysql/00006.
ALTER TABLE distributed_locks ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE distributed_locks DROP COLUMN attempt;
