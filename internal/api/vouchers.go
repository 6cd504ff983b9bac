package api

import (
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/voucher"
)

type createVoucherRequest struct {
	Title       string    `json:"title"`
	SubTitle    string    `json:"subTitle"`
	Rules       string    `json:"rules"`
	PayValue    int64     `json:"payValue"`
	ActualValue int64     `json:"actualValue"`
	Stock       *int      `json:"stock"`
	BeginTime   time.Time `json:"beginTime"`
	EndTime     time.Time `json:"endTime"`
}

type voucherResponse struct {
	ID          int64     `json:"id"`
	Title       string    `json:"title"`
	SubTitle    string    `json:"subTitle"`
	Rules       string    `json:"rules"`
	PayValue    int64     `json:"payValue"`
	ActualValue int64     `json:"actualValue"`
	Stock       int       `json:"stock"`
	BeginTime   time.Time `json:"beginTime"`
	EndTime     time.Time `json:"endTime"`
	CreatedAt   time.Time `json:"createdAt"`
}

func toVoucherResponse(v voucher.Voucher) voucherResponse {
	return voucherResponse{
		ID: v.ID, Title: v.Title, SubTitle: v.SubTitle, Rules: v.Rules,
		PayValue: v.PayValue, ActualValue: v.ActualValue, Stock: v.Stock,
		BeginTime: v.BeginTime, EndTime: v.EndTime, CreatedAt: v.CreatedAt,
	}
}

func createVoucher(log *slog.Logger, vouchers Vouchers) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !jsonContentType(c.GetHeader("Content-Type")) {
			writeError(c, statusCode{http.StatusUnsupportedMediaType, codeUnsupportedMediaType}, "the body must be sent as Content-Type: application/json")
			return
		}
		var req createVoucherRequest
		if err := decodeBody(c.Request.Body, &req); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeError(c, statusCode{http.StatusRequestEntityTooLarge, codeTooLarge}, "request body too large")
				return
			}
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "body must be JSON {title, stock, beginTime, endTime} with RFC 3339 times: "+err.Error())
			return
		}
		if req.Stock == nil {
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "stock is required")
			return
		}
		v, err := vouchers.Create(c.Request.Context(), voucher.Voucher{
			Title: req.Title, SubTitle: req.SubTitle, Rules: req.Rules,
			PayValue: req.PayValue, ActualValue: req.ActualValue, Stock: *req.Stock,
			BeginTime: req.BeginTime, EndTime: req.EndTime,
		})
		if err != nil {
			writeServiceError(c, log, err)
			return
		}
		c.JSON(http.StatusCreated, toVoucherResponse(v))
	}
}

func getVoucher(log *slog.Logger, vouchers Vouchers) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := parseID(c.Param("id"))
		if !ok {
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "voucher id must be a positive integer")
			return
		}
		v, err := vouchers.Get(c.Request.Context(), id)
		if err != nil {
			writeServiceError(c, log, err)
			return
		}
		c.JSON(http.StatusOK, toVoucherResponse(v))
	}
}

// jsonContentType reports whether a Content-Type declares JSON, with parameters (a charset)
// or without. A body declared as anything else, or as nothing, is refused rather than read as
// JSON all the same: curl -d sends application/x-www-form-urlencoded, and a client that
// sends a form or text means something the service would otherwise guess at.
func jsonContentType(h string) bool {
	mt, _, err := mime.ParseMediaType(h)
	return err == nil && mt == "application/json"
}
