package api

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"
)

func healthz() gin.HandlerFunc {
	return func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }
}

// readyz answers 200 when every check passes and 503 naming the failing ones otherwise.
func readyz(log *slog.Logger, checks map[string]Check) gin.HandlerFunc {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		status, res := http.StatusOK, gin.H{}
		for _, n := range names {
			if err := checks[n](ctx); err != nil {
				log.Warn("not ready", "check", n, "err", err)
				status, res[n] = http.StatusServiceUnavailable, err.Error()
				continue
			}
			res[n] = "ok"
		}
		c.JSON(status, gin.H{"ready": status == http.StatusOK, "checks": res})
	}
}
