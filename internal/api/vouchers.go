package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/voucher"
)

type createVoucherRequest struct {
	Title       string   `json:"title"`
	SubTitle    string   `json:"subTitle"`
	Rules       string   `json:"rules"`
	PayValue    int64    `json:"payValue"`
	ActualValue int64    `json:"actualValue"`
	Stock       *int     `json:"stock"`
	BeginTime   dateTime `json:"beginTime"`
	EndTime     dateTime `json:"endTime"`
}

// dateTime is a time in a request body, in RFC 3339's date-time form only (the contract's
// format date-time). encoding/json reads a time.Time with time.Parse's RFC3339 layout, which
// also takes a one-digit hour and a comma before the fraction (go.dev/issue/54580); a client
// that sends those sends something other than the API defines, and is told so.
type dateTime struct{ time.Time }

// UnmarshalJSON reads a JSON string, its escapes decoded, as an RFC 3339 date-time, refusing
// the forms time.Parse takes beyond it; null leaves the time zero, as it does for a
// time.Time. time.Time's own UnmarshalJSON parses the bytes between the quotes as they stand
// (go.dev/issue/47353), so it refused a time sent with an escape in it, as .NET's
// System.Text.Json sends every "+" (\u002B) by default.
func (d *dateTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a time must be a string, an RFC 3339 date-time such as 2026-01-01T08:00:00Z: %w", err)
	}
	if !rfc3339Digits(s) {
		return fmt.Errorf("%q is not an RFC 3339 date-time such as 2026-01-01T08:00:00Z", s)
	}
	return d.Time.UnmarshalText([]byte(s))
}

// rfc3339Digits reports whether s has two digits of hour ("2006-01-02T15", where time.Parse
// also takes one), if seconds have a fraction, a full stop before it (not a comma), and, if
// it ends in a numeric offset, one within RFC 3339's time-hour and time-minute, at most
// 23:59 (time.Parse takes up to 24:60). The rest of the form time.Parse checks itself.
func rfc3339Digits(s string) bool {
	const hourEnd = len("2006-01-02T15")
	if len(s) <= hourEnd || s[hourEnd] != ':' {
		return false
	}
	const secondsEnd = len("2006-01-02T15:04:05")
	if len(s) > secondsEnd && s[secondsEnd] == ',' {
		return false
	}
	if off := s[len(s)-len("-07:00"):]; (off[0] == '+' || off[0] == '-') && off[3] == ':' {
		return off[1:3] <= "23" && off[4:] <= "59"
	}
	return true
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
			writeError(c, statusCode{http.StatusUnsupportedMediaType, codeUnsupportedMediaType}, "the body must be sent as Content-Type: application/json, in UTF-8 (no charset parameter, or charset=utf-8)")
			return
		}
		var req createVoucherRequest
		if err := decodeBody(c.Request.Body, &req); err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				writeError(c, statusCode{http.StatusRequestEntityTooLarge, codeTooLarge}, "request body too large")
				return
			case errors.Is(err, errBodyUnread):
				writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "the request body could not be read in full: sent too slowly, or cut off")
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
			BeginTime: req.BeginTime.Time, EndTime: req.EndTime.Time,
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

// jsonContentType reports whether a Content-Type declares JSON in UTF-8: application/json,
// with parameters or without, and a charset, if one is named, of utf-8 in any case. A body
// declared as anything else, or as nothing, is refused rather than read as JSON all the same:
// curl -d sends application/x-www-form-urlencoded, and a client that sends a form or text
// means something the service would otherwise guess at. So is JSON in another charset
// (utf-16, iso-8859-1, even us-ascii): JSON is UTF-8 (RFC 8259, section 8.1), the body is
// read as UTF-8, and text in another encoding would be stored as what it is not.
func jsonContentType(h string) bool {
	mt, params, err := mime.ParseMediaType(h)
	if err != nil || mt != "application/json" {
		return false
	}
	charset, named := params["charset"]
	return !named || strings.EqualFold(charset, "utf-8")
}
