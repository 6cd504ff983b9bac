package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage: seckill <command> [flags]

commands:
  serve     run the HTTP service (default)
  migrate   apply the database migrations
  demo      two instances, one storm per guard, a verdict table
  pitfalls  run the wrong Redis locks from the articles, watch them fail, and their fixes
  reconcile [voucher]  the asynchronous mode's books per voucher; non-zero exit on drift
`

// run is the whole program: main only calls it, and tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := "serve", []string(nil)
	if len(args) > 1 && (!strings.HasPrefix(args[1], "-") || args[1] == "-h" || args[1] == "-help" || args[1] == "--help") {
		cmd, rest = args[1], args[2:]
	} else if len(args) > 1 {
		rest = args[1:]
	}
	err := dispatch(ctx, cmd, rest, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h: the flag set printed the usage
	}
	return err
}

func dispatch(ctx context.Context, cmd string, rest []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, getenv, stdout, stderr)
	case "pitfalls":
		return runPitfalls(ctx, rest, getenv, stdout, stderr)
	case "reconcile":
		return runReconcile(ctx, rest, getenv, stdout, stderr)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
