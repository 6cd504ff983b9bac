package api

import (
	"log/slog"

	"github.com/gin-gonic/gin"
)

// routes registers every route of the API: this is the whole surface.
func routes(r *gin.Engine, log *slog.Logger, cfg Config, vouchers Vouchers, orders Orders) {
	r.GET("/healthz", healthz())
	r.GET("/readyz", readyz(cfg.Ready))
	if cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(cfg.Metrics))
	}

	api := r.Group("/api")
	api.POST("/vouchers", requireAdmin(cfg.AdminToken), createVoucher(log, vouchers))
	api.GET("/vouchers/:id", getVoucher(log, vouchers))
	api.POST("/vouchers/:id/orders", placeOrder(log, orders, cfg.Pending))

	r.NoRoute(func(c *gin.Context) { writeError(c, statusCode{404, codeNotFound}, "no such route") })
	r.NoMethod(func(c *gin.Context) { writeError(c, statusCode{405, codeMethodNotAllowed}, "method not allowed") })
}
