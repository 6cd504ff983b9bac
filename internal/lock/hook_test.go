package lock_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
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

// lostReplyHook runs every SET, alone or in a pipeline (the SimpleRedisLock's MULTI/EXEC),
// then reports a read timeout instead of its reply: the command reached Redis, the answer
// never came back.
type lostReplyHook struct{}

var errLostReply = fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)

func (lostReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (lostReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := next(ctx, cmd); err != nil || cmd.Name() != "set" {
			return err
		}
		cmd.SetErr(errLostReply)
		return errLostReply
	}
}

func (lostReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := next(ctx, cmds); err != nil {
			return err
		}
		for _, c := range cmds {
			if c.Name() == "set" {
				for _, c := range cmds {
					c.SetErr(errLostReply)
				}
				return errLostReply
			}
		}
		return nil
	}
}
