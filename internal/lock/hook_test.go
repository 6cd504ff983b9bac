package lock_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// recordHook appends the name of every command the client sends.
type recordHook struct{ cmds *[]string }

func (h recordHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h recordHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		*h.cmds = append(*h.cmds, cmd.Name())
		return next(ctx, cmd)
	}
}

func (h recordHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// lostReplyHook runs every SET, and every run of the SimpleRedisLock's acquire script (its SET
// NX), then reports a read timeout instead of its reply: the command reached Redis, the
// answer never came back.
type lostReplyHook struct{}

var errLostReply = fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)

func (lostReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (lostReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := next(ctx, cmd); err != nil || !takes(cmd) {
			return err
		}
		cmd.SetErr(errLostReply)
		return errLostReply
	}
}

// takes reports whether cmd is a SET or the SimpleRedisLock's acquire script.
func takes(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "set":
		return true
	case "evalsha", "eval":
		s := lock.SimpleLockScript
		a := fmt.Sprint(cmd.Args()[1])
		return a == s.Hash() || a == lock.SimpleLockSource
	}
	return false
}

func (lostReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
