package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/docs"
)

// getAndHead are the methods of a read: gin, unlike net/http's ServeMux, does not answer HEAD
// for a GET route (it would answer 405), and HEAD is what some load balancers and probes send.
// net/http drops the body of an answer to HEAD.
var getAndHead = []string{http.MethodGet, http.MethodHead}

// routes registers every route of the API: this is the whole surface.
func routes(r *gin.Engine, log *slog.Logger, cfg Config, vouchers Vouchers, orders Orders) {
	r.Match(getAndHead, "/healthz", healthz())
	r.Match(getAndHead, "/readyz", readyz(cfg.Ready))
	if cfg.Metrics != nil {
		r.Match(getAndHead, "/metrics", gin.WrapH(cfg.Metrics))
	}

	api := r.Group("/api")
	api.Match(getAndHead, "/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", docs.OpenAPI) })
	api.POST("/vouchers", requireAdmin(cfg.AdminToken), deadline(cfg.VoucherTimeout), createVoucher(log, vouchers))
	api.Match(getAndHead, "/vouchers/:id", deadline(cfg.VoucherTimeout), getVoucher(log, vouchers))
	api.POST("/vouchers/:id/orders", placeOrder(log, orders, cfg.Pending))
	api.Match(getAndHead, "/orders/:id", getOrder(log, orders))

	r.NoRoute(func(c *gin.Context) { writeError(c, statusCode{404, codeNotFound}, "no such route") })
	r.NoMethod(func(c *gin.Context) { writeError(c, statusCode{405, codeMethodNotAllowed}, "method not allowed") })
}
