package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// Machine-readable error codes, as in {"error": {"code": …, "message": …}}.
const (
	codeInvalidArgument      = "invalid_argument"
	codeUnauthenticated      = "unauthenticated"
	codeForbidden            = "forbidden"
	codeSaleNotActive        = "sale_not_active"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeAlreadyOrdered       = "already_ordered"
	codeInProgress           = "order_in_progress"
	codeSoldOut              = "sold_out"
	codeTooLarge             = "payload_too_large"
	codeUnsupportedMediaType = "unsupported_media_type"
	codeUnavailable          = "unavailable"
	codeOverloaded           = "overloaded"
	codeLockExpired          = "lock_expired"
	codeInternal             = "internal"
)

type statusCode struct {
	status int
	code   string
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// OrderID is the user's existing order with already_ordered, when the service could
	// read it: a client that retries after a lost answer learns its order.
	OrderID string `json:"orderId,omitempty"`
}

func writeError(c *gin.Context, sc statusCode, msg string) {
	writeErrorDetail(c, sc.status, errorDetail{Code: sc.code, Message: msg})
}

func writeErrorDetail(c *gin.Context, status int, d errorDetail) {
	c.AbortWithStatusJSON(status, errorBody{Error: d})
}

// known maps service errors to their answer; anything else is an infrastructure failure.
var known = []struct {
	err error
	sc  statusCode
	msg string
}{
	{voucher.ErrNotFound, statusCode{http.StatusNotFound, codeNotFound}, "voucher not found"},
	{voucher.ErrInvalid, statusCode{http.StatusBadRequest, codeInvalidArgument}, ""},
	{order.ErrSaleNotActive, statusCode{http.StatusForbidden, codeSaleNotActive}, "the voucher is not on sale now"},
	{order.ErrSoldOut, statusCode{http.StatusConflict, codeSoldOut}, "the voucher is sold out"},
	{order.ErrAlreadyOrdered, statusCode{http.StatusConflict, codeAlreadyOrdered}, "this user already ordered this voucher"},
	{order.ErrInProgress, statusCode{http.StatusConflict, codeInProgress}, "another order of this user is in progress"},
	{order.ErrNotFound, statusCode{http.StatusNotFound, codeNotFound}, "order not found"},
	{order.ErrFenced, statusCode{http.StatusConflict, codeLockExpired}, "this order's lock expired and passed to another request of this user; nothing was written"},
	{order.ErrOverloaded, statusCode{http.StatusServiceUnavailable, codeOverloaded}, "too many orders in progress; try again"},
}

// retryAfterOverloaded is the Retry-After, in seconds, of an overloaded answer: the orders
// that filled the instance end within their deadline.
const retryAfterOverloaded = "1"

// writeServiceError answers err. Unknown errors (Redis or the database failing) answer 503:
// the service fails closed and the client may retry.
func writeServiceError(c *gin.Context, log *slog.Logger, err error) {
	for _, k := range known {
		if errors.Is(err, k.err) {
			msg := k.msg
			if msg == "" {
				msg = err.Error()
			}
			if k.err == order.ErrOverloaded {
				c.Header("Retry-After", retryAfterOverloaded)
			}
			d := errorDetail{Code: k.sc.code, Message: msg}
			var ao *order.AlreadyOrderedError
			if errors.As(err, &ao) {
				d.OrderID = strconv.FormatInt(ao.OrderID, 10)
			}
			writeErrorDetail(c, k.sc.status, d)
			return
		}
	}
	log.Error("request failed", "method", c.Request.Method, "path", c.FullPath(), "err", err)
	writeError(c, statusCode{http.StatusServiceUnavailable, codeUnavailable}, "a backing store is unavailable; try again")
}

// parseID parses a positive 64-bit id.
func parseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}
