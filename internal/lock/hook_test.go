package lock_test

import (
	"context"

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
