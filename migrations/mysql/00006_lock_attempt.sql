-- +goose Up
-- The attempt that last granted or re-entered each row of distributed_locks (a random number
-- per TryLock, lock.MySQLLocks). A TryLock whose answer is lost cannot tell whether its
-- statement ran; it gives back a hold only if the row still carries its attempt, so that it
-- never gives back a hold that the same owner took earlier, through this lock or another.
-- Rows there before this migration start at 0, which no attempt uses.
ALTER TABLE distributed_locks
    ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0 COMMENT 'the TryLock that last granted or re-entered the row';

-- +goose Down
ALTER TABLE distributed_locks DROP COLUMN attempt;
