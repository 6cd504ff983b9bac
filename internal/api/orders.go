package api

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// HeaderUserID carries the caller's user id. The gateway in front of the service is trusted
// to have authenticated the user and set it; the service does no authentication of its own.
const HeaderUserID = "X-User-ID"

type placeOrderResponse struct {
	// OrderID is a decimal string: ids exceed 2^53, beyond what JavaScript numbers hold.
	OrderID string `json:"orderId"`
}

func placeOrder(log *slog.Logger, orders Orders) gin.HandlerFunc {
	return func(c *gin.Context) {
		raw := c.GetHeader(HeaderUserID)
		if raw == "" {
			writeError(c, statusCode{http.StatusUnauthorized, codeUnauthenticated}, "header X-User-ID is required")
			return
		}
		userID, ok := parseID(raw)
		if !ok {
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "header X-User-ID must be a positive integer")
			return
		}
		voucherID, ok := parseID(c.Param("id"))
		if !ok {
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "voucher id must be a positive integer")
			return
		}
		// The request's context, never c: gin recycles c for another request once the
		// handler returns, while database/sql still watches the context from a goroutine.
		id, err := orders.Place(c.Request.Context(), userID, voucherID)
		if err != nil {
			writeServiceError(c, log, err)
			return
		}
		c.JSON(http.StatusCreated, placeOrderResponse{OrderID: strconv.FormatInt(id, 10)})
	}
}
