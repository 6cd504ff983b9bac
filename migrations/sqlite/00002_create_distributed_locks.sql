-- +goose Up
-- The embedded store's copy of migrations/mysql/00002. expires_at is text in one fixed
-- format ('YYYY-MM-DD HH:MM:SS.SSS', UTC, from strftime on SQLite's clock), so that text
-- order is time order. SQLite compares text byte for byte.
CREATE TABLE distributed_locks (
    name       TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL DEFAULT '',
    holds      INTEGER NOT NULL DEFAULT 0,
    version    INTEGER NOT NULL DEFAULT 0,
    expires_at TEXT    NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE distributed_locks;
