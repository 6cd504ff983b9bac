// Package api is the service's HTTP interface: the gin engine, its routes, and the mapping
// of service errors to status codes and machine-readable error codes.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// Vouchers is the voucher service as the handlers use it.
type Vouchers interface {
	Create(ctx context.Context, v voucher.Voucher) (voucher.Voucher, error)
	Get(ctx context.Context, id int64) (voucher.Voucher, error)
}

// Orders is the order service as the handlers use it.
type Orders interface {
	Place(ctx context.Context, userID, voucherID int64) (int64, error)
	Get(ctx context.Context, userID, orderID int64) (order.Summary, error)
}

// Check reports whether a dependency (MySQL, Redis) is reachable.
type Check func(ctx context.Context) error

// Config is what the HTTP layer needs besides the services.
type Config struct {
	// AdminToken guards POST /api/vouchers. Empty refuses every caller.
	AdminToken string
	// MaxBodyBytes caps request bodies; 0 means 64 KiB.
	MaxBodyBytes int64
	// Ready is what GET /readyz answers: the last result of its background checks. Nil has
	// no checks and is always ready.
	Ready *Readiness
	// Metrics serves GET /metrics; nil leaves the route out (404 not_found like any unknown route).
	Metrics http.Handler
	// Timing, when set, times every request (MetricRequestDuration).
	Timing *Metrics
	// Pending says orders are admitted and written later (the asynchronous mode): a placed
	// order answers 202 {"orderId", "status": "pending"} instead of 201.
	Pending bool
	// VoucherTimeout is the deadline of each voucher request (GET and POST /api/vouchers),
	// from its arrival: every store call under it ends by then, and one that did not answer
	// is answered 503 unavailable. The orders carry deadlines of their own (the order
	// services'). Zero takes order.DefaultTimeout, an order's, whose own read of the voucher
	// is the same query.
	VoucherTimeout time.Duration
}

// NewServer builds the HTTP handler of one service instance.
func NewServer(log *slog.Logger, cfg Config, vouchers Vouchers, orders Orders) http.Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.VoucherTimeout <= 0 {
		cfg.VoucherTimeout = order.DefaultTimeout
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// A path is a route's exactly or no route (404 not_found): gin's redirects of a path
	// with a trailing slash (301, 307) or another spelling answer in HTML, or with no body,
	// which a JSON client cannot read; and gin builds their Location from X-Forwarded-Prefix,
	// a header any client can send.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	if cfg.Timing != nil {
		r.Use(cfg.Timing.observe()) // first, so a recovered panic's 500 is timed too
	}
	r.Use(recoverJSON(log), limitBody(cfg.MaxBodyBytes))
	routes(r, log, cfg, vouchers, orders)
	return r
}
