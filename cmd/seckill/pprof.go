package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// checkPprofAddr accepts an empty address (no profiling listener) or host:port on a loopback
// host: the profiles show the program's internals and a CPU profile costs CPU while it runs,
// so they are never served where the API is.
func checkPprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		err = checkListenPort(port)
	}
	if err != nil {
		return fmt.Errorf("SECKILL_PPROF_ADDR=%q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("SECKILL_PPROF_ADDR=%q: want a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)", addr)
	}
	return nil
}

// servePprof serves Go's runtime profiles (net/http/pprof, under /debug/pprof/) on addr until
// ctx ends. The server of its own keeps them off the API's listener and out of its timeouts: a
// CPU profile takes as long as it was asked to (?seconds=N).
func servePprof(ctx context.Context, log *slog.Logger, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	log.Info("pprof serving", "addr", ln.Addr().String())
	return nil
}
