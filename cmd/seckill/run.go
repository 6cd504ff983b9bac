package main

import (
	"context"
	"fmt"
	"io"
)

const usage = `usage: seckill <command> [flags]

commands:
  serve     run the HTTP service (default)
  migrate   apply the database migrations
  demo      two instances, one storm per guard, a verdict table
  pitfalls  run the wrong Redis locks from the articles, watch them fail, and their fixes
`

// run is the whole program: main only calls it, and tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd, rest := "serve", []string(nil)
	if len(args) > 1 {
		cmd, rest = args[1], args[2:]
	}
	switch cmd {
	case "pitfalls":
		return runPitfalls(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		_ = ctx
		_ = getenv
		_ = rest
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
