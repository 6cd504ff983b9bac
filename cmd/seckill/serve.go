package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// shutdownGrace bounds how long in-flight orders get to finish and release their locks,
// unless an order may run longer (see graceFor).
const shutdownGrace = 15 * time.Second

// graceFor is how long a shutdown waits for in-flight requests when an order may run for
// span: shutdownGrace, or longer when span is (SECKILL_ORDER_TIMEOUT beyond it, which
// explicit fencing allows), so that no order still inside its deadline is cut off.
func graceFor(span time.Duration) time.Duration {
	return max(shutdownGrace, span+writeTimeoutSlack)
}

// The HTTP server's limits. Every request of this API is a few hundred bytes of headers and
// at most a 64 KiB body (the admin API's JSON; the order endpoint takes none), and behind
// nginx a request arrives in one piece: nginx reads the whole request before it opens the
// upstream request.
const (
	// readHeaderTimeout bounds a client that sends its headers slowly (slowloris).
	readHeaderTimeout = 2 * time.Second
	// readTimeout bounds reading the whole request, headers and body. Without it a client
	// that trickles a body holds its connection and goroutine for as long as it likes, and
	// holds back the answer too: net/http reads what a handler left of a body (up to
	// 256 KiB) before it writes the response, to keep the connection usable. It does not
	// bound the handler: net/http lifts the read deadline once the request has been read.
	readTimeout = 3 * time.Second
	// writeTimeoutSlack is what WriteTimeout allows beyond the lock TTL. WriteTimeout runs
	// from the end of the request headers to the end of the response, so it must exceed the
	// longest order a request can run, which the order's deadline keeps inside the lock TTL:
	// an order that outlived WriteTimeout would be committed and its 201 lost on the wire.
	writeTimeoutSlack = 5 * time.Second
	// idleTimeout closes a keep-alive connection with no request. It is longer than nginx's
	// upstream keepalive_timeout (60 s, deploy/nginx) so that nginx, not the instance, closes
	// an idle connection: an instance closing one just as nginx sends a POST on it would be
	// a failure after the request was sent, which nginx rightly does not retry (a 502).
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes caps the request headers (net/http allows 4 KiB more before it answers
	// 431); its default, 1 MiB, lets every connection cost a megabyte of memory. That 431 is
	// net/http's plain text, written before any handler, so not in the API's JSON: nginx
	// (large_client_header_buffers, deploy/nginx) refuses headers over a smaller limit
	// itself, in JSON, so that behind it this one is never reached.
	maxHeaderBytes = 16 << 10
)

// maxOrderSpan is the longest an order may run (orderSpan) that the HTTP server's write
// timeout and the shutdown grace, each that + writeTimeoutSlack, can hold: past it the sum
// wraps around to a negative duration, which net/http takes as no write timeout at all and
// graceFor as shutdownGrace, cutting off orders still inside their deadline.
const maxOrderSpan = time.Duration(math.MaxInt64) - writeTimeoutSlack

// newHTTPServer is the HTTP server of an instance, with the limits above; lockTTL is the
// longest an order may run: the instance's SECKILL_LOCK_TTL, or its order deadline when
// fencing or the asynchronous mode lets that be longer (orderSpan).
func newHTTPServer(h http.Handler, lockTTL time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      lockTTL + writeTimeoutSlack,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// stopBounds are how long the instance's graceful stop may take once it is told to stop: grace
// for in-flight requests (graceFor), then, in the asynchronous mode, writer for the order
// writer's batch in progress (async.StopTimeout), and their sum, total (Go's longest duration
// where the sum would overflow). Whatever stops the instance (scripts/cluster.sh, an
// orchestrator's grace period) should allow total before it kills it: the instance logs it as
// it starts serving (stop_within).
func stopBounds(cfg config) (grace, writer, total time.Duration) {
	grace = graceFor(orderSpan(cfg.appConfig().Order))
	if cfg.orderMode == app.ModeAsync {
		writer = async.StopTimeout(cfg.stream.ClaimIdle)
	}
	if grace > math.MaxInt64-writer {
		return grace, writer, math.MaxInt64
	}
	return grace, writer, grace + writer
}

// orderSpan is the longest an order of o may run: within the lock's lease, or within its
// deadline when that is longer (explicit fencing allows it, and the asynchronous mode, whose
// orders take no lock).
func orderSpan(o order.Config) time.Duration { return max(o.LockTTL, o.EffectiveTimeout()) }

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
	if cfg.orderMode != app.ModeAsync { // the asynchronous mode takes no per-user lock
		warnUnsafeLock(log, cfg.lock)
	}

	inst, err := newInstance(ctx, log, cfg.appConfig(), st)
	if err != nil {
		return err
	}
	closed := false // by the end of a shutdown; every other return closes it here
	defer func() {
		if !closed {
			_ = inst.Close()
		}
	}()

	if cfg.pprofAddr != "" {
		if err := servePprof(ctx, log, cfg.pprofAddr); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := newHTTPServer(inst.Handler, orderSpan(cfg.appConfig().Order))
	grace, writerStop, stopWithin := stopBounds(cfg)
	log.Info("seckill serving", "addr", ln.Addr().String(), "order_mode", cfg.orderMode, "lock", cfg.lock, "lock_ttl", cfg.lockTTL,
		"order_delay", cfg.orderDelay, "process", inst.Process, "stop_within", stopWithin)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if cfg.orderMode == app.ModeAsync {
		// Then the instance's close lets the writer's batch in progress commit: the whole
		// stop may take both.
		log.Info("shutting down: draining in-flight requests, then the order writer", "grace", grace,
			"writer_stop", writerStop)
	} else {
		log.Info("shutting down: draining in-flight requests", "grace", grace)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	// The instance stops before "stopped" is said: in async mode its writer may still be
	// committing a batch then, and one that outlives its bound fails the stop.
	closed = true
	if err := inst.Close(); err != nil {
		return fmt.Errorf("stop: %w", err)
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
