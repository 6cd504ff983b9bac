package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/seckill/seckill/internal/app"
)

// shutdownGrace bounds how long in-flight orders get to finish and release their locks.
const shutdownGrace = 15 * time.Second

// runServe runs one service instance until ctx is cancelled (SIGINT/SIGTERM), then stops
// accepting, lets in-flight requests finish and exits.
func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig("serve", args, getenv, stderr, nil)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	st, err := openStores(ctx, log, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	warnUnsafeLock(log, cfg.lock)

	inst, err := app.New(ctx, log, cfg.appConfig(), st)
	if err != nil {
		return err
	}
	defer inst.Close()

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: inst.Handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Info("seckill serving", "addr", ln.Addr().String(), "lock", cfg.lock, "lock_ttl", cfg.lockTTL,
		"order_delay", cfg.orderDelay, "process", inst.Process)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests", "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

func warnUnsafeLock(log *slog.Logger, kind string) {
	if app.LockKinds[kind].Safe {
		return
	}
	log.Warn("!!! UNSAFE GUARD: SECKILL_LOCK=" + kind + " does not exclude concurrent orders across instances" +
		" (local: one process only; none: not at all). It exists to show the failure; never run it in production. !!!")
}
