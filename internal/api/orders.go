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
	// Status is "pending" in the asynchronous mode (202): the order is admitted, not yet
	// written. Absent in the synchronous mode (201: written).
	Status string `json:"status,omitempty"`
}

// statusPending is an admitted order's status until the writer commits it.
const statusPending = "pending"

// placeOrder takes no body and never reads one. A request that carries one (any
// Content-Length but 0, or chunked) is refused with 400 before anything else, and its
// connection closed: read or not, a body would otherwise be read by net/http before the
// answer goes out (to keep the connection usable), so a client that sends one slowly would
// hold back its own answer, and a client that sends one expects it to mean something.
//
// pending (the asynchronous mode) answers an admitted order 202 with status pending.
func placeOrder(log *slog.Logger, orders Orders, pending bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength != 0 {
			c.Header("Connection", "close")
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "an order takes no request body")
			return
		}
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
		if pending {
			c.JSON(http.StatusAccepted, placeOrderResponse{OrderID: strconv.FormatInt(id, 10), Status: statusPending})
			return
		}
		c.JSON(http.StatusCreated, placeOrderResponse{OrderID: strconv.FormatInt(id, 10)})
	}
}
