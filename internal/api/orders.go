package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/order"
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
		userID, ok := user(c)
		if !ok {
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

// orderResponse is one order as its owner sees it. Ids that may exceed 2^53 (the order's,
// the user's) are decimal strings.
type orderResponse struct {
	OrderID   string    `json:"orderId"`
	VoucherID int64     `json:"voucherId"`
	UserID    string    `json:"userId"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// getOrder answers the caller's own order; another user's answers 404 like a missing one.
func getOrder(log *slog.Logger, orders Orders) gin.HandlerFunc {
	return func(c *gin.Context) {
		userID, ok := user(c)
		if !ok {
			return
		}
		orderID, ok := parseID(c.Param("id"))
		if !ok {
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "order id must be a positive integer")
			return
		}
		o, err := orders.Get(c.Request.Context(), userID, orderID)
		if err != nil {
			writeServiceError(c, log, err)
			return
		}
		c.JSON(http.StatusOK, toOrderResponse(o))
	}
}

func toOrderResponse(o order.Summary) orderResponse {
	return orderResponse{
		OrderID: strconv.FormatInt(o.ID, 10), VoucherID: o.VoucherID, UserID: strconv.FormatInt(o.UserID, 10),
		Status: string(o.State), Reason: o.Reason, CreatedAt: o.CreatedAt.UTC(),
	}
}

// user reads the caller's id from X-User-ID, or answers 401 (missing) or 400 (sent more than
// once, or not a positive integer) and reports false. A header sent twice names no one: read
// here as the first line (gin's GetHeader) and by a proxy as the last, or as both joined
// (nginx from 1.23), it would be one user to the service and another to whatever checked it.
func user(c *gin.Context) (int64, bool) {
	if len(c.Request.Header.Values(HeaderUserID)) > 1 {
		writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "header X-User-ID must be sent once")
		return 0, false
	}
	raw := c.GetHeader(HeaderUserID)
	if raw == "" {
		writeError(c, statusCode{http.StatusUnauthorized, codeUnauthenticated}, "header X-User-ID is required")
		return 0, false
	}
	userID, ok := parseID(raw)
	if !ok {
		writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "header X-User-ID must be a positive integer")
		return 0, false
	}
	return userID, true
}
