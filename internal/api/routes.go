package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/docs"
)

// routes registers every route of the API: this is the whole surface.
func routes(r *gin.Engine, log *slog.Logger, cfg Config, vouchers Vouchers, orders Orders) {
	r.GET("/healthz", healthz())
	r.GET("/readyz", readyz(cfg.Ready))
	if cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(cfg.Metrics))
	}

	api := r.Group("/api")
	api.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", docs.OpenAPI) })
	api.POST("/vouchers", requireAdmin(cfg.AdminToken), createVoucher(log, vouchers))
	api.GET("/vouchers/:id", getVoucher(log, vouchers))
	api.POST("/vouchers/:id/orders", placeOrder(log, orders, cfg.Pending))
	api.GET("/orders/:id", getOrder(log, orders))

	r.NoRoute(func(c *gin.Context) { writeError(c, statusCode{404, codeNotFound}, "no such route") })
	r.NoMethod(func(c *gin.Context) { writeError(c, statusCode{405, codeMethodNotAllowed}, "method not allowed") })
}
