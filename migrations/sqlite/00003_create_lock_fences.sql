-- +goose Up
-- The embedded store's copy of migrations/mysql/00003.
CREATE TABLE lock_fences (
    name   TEXT    NOT NULL PRIMARY KEY,
    token  INTEGER NOT NULL,
    claims INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- +goose Down
DROP TABLE lock_fences;
