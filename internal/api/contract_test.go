package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

const validVoucherBody = `{"title":"t","stock":10,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`

var (
	admin  = map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}
	user42 = map[string]string{api.HeaderUserID: "42"}
)

// TestErrorContract drives every error status and code of the API through fake services and
// checks the status, the error body's shape and code, and whether the service was reached.
func TestErrorContract(t *testing.T) {
	errDB := errors.New("dial tcp 127.0.0.1:3306: connection refused")
	tests := []struct {
		name     string
		token    string // admin token configured; testToken when empty and !noToken
		noToken  bool
		maxBody  int64
		req      request
		svcErr   error // what both fake services answer
		want     int
		wantCode string
		wantCall bool // whether the request must reach a service
	}{
		// 400 invalid_argument
		{name: "create: not JSON", req: request{"POST", "/api/vouchers", admin, `{"title":`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: empty body", req: request{"POST", "/api/vouchers", admin, ``}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: JSON array", req: request{"POST", "/api/vouchers", admin, `[1,2]`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: missing stock", req: request{"POST", "/api/vouchers", admin, `{"title":"t","beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: null stock", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":null,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: stock not an integer", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1.5,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: stock overflows int", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":99999999999999999999,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: stock a string", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":"10","beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: time not RFC 3339", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1,"beginTime":"2026-01-01 00:00:00","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: time without zone", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: time a number", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1,"beginTime":1767225600,"endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: invalid date", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1,"beginTime":"2026-02-30T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: data after the JSON body", req: request{"POST", "/api/vouchers", admin, validVoucherBody + ` x`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: two JSON bodies", req: request{"POST", "/api/vouchers", admin, validVoucherBody + validVoucherBody}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: duplicate key", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":10,"stock":1000,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: duplicate key in another case", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":10,"STOCK":1000,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: duplicate key in a nested object", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":10,"x":[{"a":1,"a":2}],"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "create: service rejects (end before begin)", req: request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1,"beginTime":"2027-01-01T00:00:00Z","endTime":"2026-01-01T00:00:00Z"}`},
			svcErr: fmt.Errorf("%w: endTime must be after beginTime", voucher.ErrInvalid), want: 400, wantCode: api.CodeInvalidArgument, wantCall: true},
		{name: "get: id not a number", req: request{"GET", "/api/vouchers/abc", nil, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get: id zero", req: request{"GET", "/api/vouchers/0", nil, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get: id negative", req: request{"GET", "/api/vouchers/-1", nil, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get: id overflows int64", req: request{"GET", "/api/vouchers/9223372036854775808", nil, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get: id fractional", req: request{"GET", "/api/vouchers/1.0", nil, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get: id hex", req: request{"GET", "/api/vouchers/0x10", nil, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: voucher id not a number", req: request{"POST", "/api/vouchers/x/orders", user42, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: voucher id zero", req: request{"POST", "/api/vouchers/0/orders", user42, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: voucher id overflows", req: request{"POST", "/api/vouchers/99999999999999999999/orders", user42, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: user id zero", req: request{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: "0"}, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: user id negative", req: request{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: "-42"}, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: user id overflows int64", req: request{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: "9223372036854775808"}, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: user id not a number", req: request{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: "alice"}, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: with a body", req: request{"POST", "/api/vouchers/1/orders", user42, `{"quantity":2}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: with an empty JSON object", req: request{"POST", "/api/vouchers/1/orders", user42, `{}`}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "order: user id with spaces", req: request{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: "4 2"}, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get order: id not a number", req: request{"GET", "/api/orders/abc", user42, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get order: id zero", req: request{"GET", "/api/orders/0", user42, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get order: id overflows int64", req: request{"GET", "/api/orders/9223372036854775808", user42, ""}, want: 400, wantCode: api.CodeInvalidArgument},
		{name: "get order: user id not a number", req: request{"GET", "/api/orders/1", map[string]string{api.HeaderUserID: "alice"}, ""}, want: 400, wantCode: api.CodeInvalidArgument},

		// 401 unauthenticated
		{name: "create: no Authorization", req: request{"POST", "/api/vouchers", nil, validVoucherBody}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "create: wrong token", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer nope"}, validVoucherBody}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "create: token prefix only", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken[:4]}, validVoucherBody}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "create: not a bearer", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Basic " + testToken}, validVoucherBody}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "create: bare token", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": testToken}, validVoucherBody}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "create: empty bearer", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer "}, validVoucherBody}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "order: no X-User-ID", req: request{"POST", "/api/vouchers/1/orders", nil, ""}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "order: empty X-User-ID", req: request{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: ""}, ""}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "get order: no X-User-ID", req: request{"GET", "/api/orders/1", nil, ""}, want: 401, wantCode: api.CodeUnauthenticated},
		{name: "get order: no X-User-ID and a bad id", req: request{"GET", "/api/orders/abc", nil, ""}, want: 401, wantCode: api.CodeUnauthenticated},

		// 403
		{name: "create: no admin token configured", noToken: true, req: request{"POST", "/api/vouchers", admin, validVoucherBody}, want: 403, wantCode: api.CodeForbidden},
		{name: "create: no admin token configured, empty bearer", noToken: true, req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer "}, validVoucherBody}, want: 403, wantCode: api.CodeForbidden},
		{name: "order: sale not active", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: order.ErrSaleNotActive, want: 403, wantCode: api.CodeSaleNotActive, wantCall: true},

		// 404
		{name: "get: voucher not found", req: request{"GET", "/api/vouchers/5", nil, ""}, svcErr: voucher.ErrNotFound, want: 404, wantCode: api.CodeNotFound, wantCall: true},
		{name: "order: voucher not found", req: request{"POST", "/api/vouchers/5/orders", user42, ""}, svcErr: voucher.ErrNotFound, want: 404, wantCode: api.CodeNotFound, wantCall: true},
		{name: "get order: not found, or another user's", req: request{"GET", "/api/orders/5", user42, ""}, svcErr: order.ErrNotFound, want: 404, wantCode: api.CodeNotFound, wantCall: true},
		{name: "unknown route", req: request{"GET", "/api/nope", nil, ""}, want: 404, wantCode: api.CodeNotFound},
		{name: "unknown route under a voucher", req: request{"GET", "/api/vouchers/1/nope", nil, ""}, want: 404, wantCode: api.CodeNotFound},
		{name: "root", req: request{"GET", "/", nil, ""}, want: 404, wantCode: api.CodeNotFound},

		// 405
		{name: "DELETE a voucher", req: request{"DELETE", "/api/vouchers/1", nil, ""}, want: 405, wantCode: api.CodeMethodNotAllowed},
		{name: "GET the vouchers collection", req: request{"GET", "/api/vouchers", nil, ""}, want: 405, wantCode: api.CodeMethodNotAllowed},
		{name: "GET orders", req: request{"GET", "/api/vouchers/1/orders", user42, ""}, want: 405, wantCode: api.CodeMethodNotAllowed},
		{name: "POST healthz", req: request{"POST", "/healthz", nil, ""}, want: 405, wantCode: api.CodeMethodNotAllowed},
		{name: "POST an order", req: request{"POST", "/api/orders/1", user42, ""}, want: 405, wantCode: api.CodeMethodNotAllowed},

		// 409
		{name: "order: already ordered", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: order.ErrAlreadyOrdered, want: 409, wantCode: api.CodeAlreadyOrdered, wantCall: true},
		{name: "order: in progress", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: order.ErrInProgress, want: 409, wantCode: api.CodeInProgress, wantCall: true},
		{name: "order: sold out", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: order.ErrSoldOut, want: 409, wantCode: api.CodeSoldOut, wantCall: true},
		{name: "order: sold out, wrapped", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: fmt.Errorf("place: %w", order.ErrSoldOut), want: 409, wantCode: api.CodeSoldOut, wantCall: true},

		// 413
		{name: "create: body over the default 64 KiB", req: request{"POST", "/api/vouchers", admin, `{"title":"` + strings.Repeat("x", 65<<10) + `","stock":1}`}, want: 413, wantCode: api.CodeTooLarge},
		{name: "create: body over a configured limit", maxBody: 100, req: request{"POST", "/api/vouchers", admin, `{"title":"` + strings.Repeat("x", 100) + `","stock":1}`}, want: 413, wantCode: api.CodeTooLarge},

		// 415 unsupported_media_type: the document takes a voucher as application/json only,
		// and curl -d, without -H, sends application/x-www-form-urlencoded.
		{name: "create: form-encoded body", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/x-www-form-urlencoded"}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: text/plain body", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "text/plain"}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: no Content-Type", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: malformed Content-Type", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json; charset"}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		// JSON is UTF-8 (RFC 8259, 8.1): a body declared in another charset would be read as
		// UTF-8 all the same, its text taken for what it is not.
		{name: "create: charset utf-16", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json; charset=utf-16"}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: charset quoted, upper case", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": `application/json;charset="UTF-16LE"`}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: charset iso-8859-1", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json; Charset=ISO-8859-1"}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: charset us-ascii", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json; charset=us-ascii"}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},
		{name: "create: charset empty", req: request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": `application/json; charset=""`}, validVoucherBody},
			want: 415, wantCode: api.CodeUnsupportedMediaType},

		// 503 unavailable
		{name: "create: database down", req: request{"POST", "/api/vouchers", admin, validVoucherBody}, svcErr: errDB, want: 503, wantCode: api.CodeUnavailable, wantCall: true},
		{name: "get: database down", req: request{"GET", "/api/vouchers/1", nil, ""}, svcErr: errDB, want: 503, wantCode: api.CodeUnavailable, wantCall: true},
		{name: "order: store unavailable", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: fmt.Errorf("%w: %w", order.ErrUnavailable, errDB), want: 503, wantCode: api.CodeUnavailable, wantCall: true},
		{name: "order: context canceled", req: request{"POST", "/api/vouchers/1/orders", user42, ""}, svcErr: context.Canceled, want: 503, wantCode: api.CodeUnavailable, wantCall: true},
		{name: "get order: store unavailable", req: request{"GET", "/api/orders/1", user42, ""}, svcErr: fmt.Errorf("%w: %w", order.ErrUnavailable, errDB), want: 503, wantCode: api.CodeUnavailable, wantCall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := testToken
			if tt.noToken {
				token = ""
			}
			vs := &fakeVouchers{err: tt.svcErr}
			os := &fakeOrders{id: 1, err: tt.svcErr}
			h := api.NewServer(discardLog(), api.Config{AdminToken: token, MaxBodyBytes: tt.maxBody}, vs, os)

			w := serve(t, h, tt.req)

			require.Equal(t, tt.want, w.Code, "status; body %s", w.Body)
			requireErrorBody(t, w, tt.wantCode)
			calls := len(vs.created) + len(vs.got) + len(os.calls) + len(os.got)
			if tt.wantCall {
				assert.Equal(t, 1, calls, "service calls")
			} else {
				assert.Zero(t, calls, "service calls: the request must be refused before any service")
			}
		})
	}
}

// TestUserIDSentTwice: X-User-ID sent more than once, even with one value twice, is refused
// with 400 invalid_argument before any service: the first line is not taken (gin's GetHeader
// would take it, while nginx from 1.23 would pass the lines joined, and a proxy might check
// the last), so that the user is never read one way through nginx and another directly.
func TestUserIDSentTwice(t *testing.T) {
	for _, values := range [][]string{{"1", "2"}, {"42", "42"}, {"", "42"}, {"42", ""}} {
		for _, target := range []string{"POST /api/vouchers/1/orders", "GET /api/orders/1"} {
			t.Run(target+" "+strings.Join(values, ","), func(t *testing.T) {
				os := &fakeOrders{id: 1}
				h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, os)
				method, path, _ := strings.Cut(target, " ")
				req := httptest.NewRequest(method, path, nil)
				for _, v := range values {
					req.Header.Add(api.HeaderUserID, v)
				}
				w := serveRequest(t, h, req)
				require.Equal(t, http.StatusBadRequest, w.Code, "status; body %s", w.Body)
				requireErrorBody(t, w, api.CodeInvalidArgument)
				assert.Contains(t, w.Body.String(), "sent once")
				assert.Zero(t, len(os.calls)+len(os.got), "service calls")
			})
		}
	}
}

// TestAuthorizationSentTwice: the admin's Authorization sent more than once, even the right
// token twice, is refused with 400 invalid_argument and creates nothing: gin's GetHeader read
// the first line, so a right token first passed whatever followed it.
func TestAuthorizationSentTwice(t *testing.T) {
	for _, values := range [][]string{{"Bearer " + testToken, "Bearer nope"}, {"Bearer " + testToken, "Bearer " + testToken}, {"Bearer nope", "Bearer " + testToken}} {
		t.Run(strings.Join(values, ","), func(t *testing.T) {
			vs := &fakeVouchers{}
			h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
			req := httptest.NewRequest(http.MethodPost, "/api/vouchers", strings.NewReader(validVoucherBody))
			req.Header.Set("Content-Type", "application/json")
			for _, v := range values {
				req.Header.Add("Authorization", v)
			}
			w := serveRequest(t, h, req)
			require.Equal(t, http.StatusBadRequest, w.Code, "status; body %s", w.Body)
			requireErrorBody(t, w, api.CodeInvalidArgument)
			assert.Contains(t, w.Body.String(), "sent once")
			assert.Empty(t, vs.created, "vouchers created")
		})
	}
}

// TestNoRedirects: a route's path spelt otherwise, with a trailing slash or as gin's
// RedirectFixedPath would correct it (another case, a doubled slash, a dot segment), is no
// route: 404 not_found in JSON, as docs/openapi.yaml says, never a redirect. gin's redirects
// answered 301 (GET) or 307 with an HTML body or none, which a JSON client cannot read, and
// whose Location gin prefixed with X-Forwarded-Prefix, a header any client can send. HEAD
// answers the same status, without the body.
func TestNoRedirects(t *testing.T) {
	for _, tt := range []struct {
		method, path, prefix string
	}{
		{"GET", "/api/vouchers/1/", ""},
		{"GET", "/api/vouchers/1/", "/elsewhere"},
		{"HEAD", "/api/vouchers/1/", ""},
		{"GET", "/healthz/", "/"},
		{"GET", "/readyz/", ""},
		{"GET", "/api/openapi.yaml/", ""},
		{"GET", "/api/orders/1/", ""},
		{"POST", "/api/vouchers/1/orders/", "evil.example"},
		{"POST", "/api/vouchers/", ""},
		{"GET", "/API/vouchers/1", ""},
		{"GET", "/Healthz", ""},
		{"GET", "/api//vouchers/1", ""},
		{"GET", "/api/./vouchers/1", ""},
		{"GET", "/api/vouchers/1/orders/../", ""},
	} {
		t.Run(tt.method+" "+tt.path+" "+tt.prefix, func(t *testing.T) {
			os := &fakeOrders{id: 1}
			h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, &fakeVouchers{}, os)
			hdr := map[string]string{api.HeaderUserID: "42", "Authorization": "Bearer " + testToken}
			if tt.prefix != "" {
				hdr["X-Forwarded-Prefix"] = tt.prefix
			}
			w := serve(t, h, request{tt.method, tt.path, hdr, ""})
			require.Equal(t, http.StatusNotFound, w.Code, "status; Location %q, body %q", w.Header().Get("Location"), w.Body)
			assert.Empty(t, w.Header().Get("Location"))
			assert.Empty(t, os.calls, "an order was placed")
			if tt.method == "HEAD" {
				assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))
				return
			}
			requireErrorBody(t, w, api.CodeNotFound)
		})
	}
}

// TestErrorMessages checks that the answer to a validation error carries the service's
// reason, and that an infrastructure error is not shown to the client.
func TestErrorMessages(t *testing.T) {
	vs := &fakeVouchers{err: fmt.Errorf("%w: stock must be between 0 and 100", voucher.ErrInvalid)}
	h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
	w := serve(t, h, request{"POST", "/api/vouchers", admin, validVoucherBody})
	require.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "stock must be between 0 and 100")

	vs.err = errors.New("Error 1045: Access denied for user 'root'@'10.0.0.1'")
	w = serve(t, h, request{"GET", "/api/vouchers/1", nil, ""})
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.NotContains(t, w.Body.String(), "Access denied", "infrastructure details leak to the client")
}

func TestCreateVoucher(t *testing.T) {
	vs := &fakeVouchers{}
	h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
	body := `{"title":"50 off","subTitle":"weekdays","rules":"one per user","payValue":4750,"actualValue":5000,` +
		`"stock":100,"beginTime":"2026-11-22T08:00:00+08:00","endTime":"2026-11-23T00:00:00Z"}`

	w := serve(t, h, request{"POST", "/api/vouchers", admin, body})

	require.Equal(t, http.StatusCreated, w.Code, "status; body %s", w.Body)
	got := decodeJSON(t, w)
	assert.Equal(t, map[string]any{
		"id": float64(7), "title": "50 off", "subTitle": "weekdays", "rules": "one per user",
		"payValue": float64(4750), "actualValue": float64(5000), "stock": float64(100),
		"beginTime": "2026-11-22T08:00:00+08:00", "endTime": "2026-11-23T00:00:00Z", "createdAt": "0001-01-01T00:00:00Z",
	}, got)
	require.Len(t, vs.created, 1)
	v := vs.created[0]
	assert.Equal(t, "50 off", v.Title)
	assert.Equal(t, 100, v.Stock)
	assert.True(t, v.BeginTime.Equal(mustTime(t, "2026-11-22T00:00:00Z")), "beginTime passed %v", v.BeginTime)
}

// TestCreateVoucherStrictJSON: the body is one JSON value, no member named twice, the fields
// named exactly (encoding/json would take "Stock" for "stock"); white space after it,
// unknown members and a name repeated in different objects are fine.
func TestCreateVoucherStrictJSON(t *testing.T) {
	const tail = `"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`
	tests := []struct {
		name, body string
		wantMsg    string // empty: accepted
	}{
		{"white space after", validVoucherBody + "\r\n\t ", ""},
		{"unknown member", `{"title":"t","stock":1,"color":"red",` + tail, ""},
		{"one name in two objects", `{"title":"t","stock":1,"x":{"title":"u","stock":2},"y":[{"a":1},{"a":1}],` + tail, ""},
		{"data after", validVoucherBody + `,`, "after top-level value"},
		{"a second object after", validVoucherBody + ` {}`, "after top-level value"},
		{"stock twice", `{"title":"t","stock":1,"stock":1,` + tail, `duplicate key "stock"`},
		{"title in two cases", `{"title":"t","stock":1,"Title":"u",` + tail, `member "Title": names are case-sensitive: the field is "title"`},
		{"a field in another case", `{"title":"t","stoCk":1,` + tail, `member "stoCk": names are case-sensitive: the field is "stock"`},
		{"a time in another case", `{"title":"t","stock":1,"BeginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`, `member "BeginTime"`},
		{"a field's name in another case in a nested object", `{"title":"t","stock":1,"x":{"Stock":2},` + tail, ""},
		{"an unknown member in two cases", `{"title":"t","stock":1,"color":"red","Color":"blue",` + tail, `duplicate key "Color"`},
		{"unknown member twice", `{"title":"t","stock":1,"x":1,"x":1,` + tail, `duplicate key "x"`},
		{"twice in a nested object", `{"title":"t","stock":1,"x":{"y":{"a":1,"b":{},"a":[]}},` + tail, `duplicate key "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := &fakeVouchers{}
			h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
			w := serve(t, h, request{"POST", "/api/vouchers", admin, tt.body})
			if tt.wantMsg == "" {
				require.Equal(t, http.StatusCreated, w.Code, "body %s", w.Body)
				assert.Len(t, vs.created, 1)
				return
			}
			require.Equal(t, http.StatusBadRequest, w.Code, "body %s", w.Body)
			requireErrorBody(t, w, api.CodeInvalidArgument)
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
			assert.Contains(t, e.Error.Message, tt.wantMsg)
			assert.Empty(t, vs.created, "a refused body reached the service")
		})
	}
}

// TestCreateVoucherTimesAreRFC3339: beginTime and endTime are RFC 3339 date-times, as the
// contract says (format date-time); the forms time.Parse takes beyond it, a one-digit hour and
// a comma before the fraction, are refused.
func TestCreateVoucherTimesAreRFC3339(t *testing.T) {
	tests := []struct {
		name, begin string
		wantOK      bool
	}{
		{"UTC", "2026-01-01T08:00:00Z", true},
		{"offset and fraction", "2026-01-01T08:00:00.5+08:00", true},
		{"one-digit hour", "2026-01-01T8:00:00Z", false},
		{"one-digit hour with an offset", "2026-01-01T8:00:00+08:00", false},
		{"comma before the fraction", "2026-01-01T08:00:00,5Z", false},
		{"the largest offsets", "2026-01-01T08:00:00.5-23:59", true},
		{"offset hour 24", "2026-01-01T08:00:00+24:00", false},
		{"offset hour -24", "2026-01-01T08:00:00-24:00", false},
		{"offset minute 60", "2026-01-01T08:00:00+23:60", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := &fakeVouchers{}
			h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
			body := `{"title":"t","stock":1,"beginTime":"` + tt.begin + `","endTime":"2027-01-01T00:00:00Z"}`
			w := serve(t, h, request{"POST", "/api/vouchers", admin, body})
			if tt.wantOK {
				require.Equal(t, http.StatusCreated, w.Code, "body %s", w.Body)
				return
			}
			require.Equal(t, http.StatusBadRequest, w.Code, "body %s", w.Body)
			requireErrorBody(t, w, api.CodeInvalidArgument)
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
			assert.Contains(t, e.Error.Message, `"`+tt.begin+`" is not an RFC 3339 date-time`)
			assert.Empty(t, vs.created, "a refused body reached the service")
		})
	}
}

// TestCreateVoucherTimesWithJSONEscapes: a time is a JSON string like any other, read with its
// escapes: .NET's System.Text.Json writes "+" as \u002B by default, so a client there sends an
// offset as "\u002B08:00". An escaped time that is no RFC 3339 date-time is still refused.
func TestCreateVoucherTimesWithJSONEscapes(t *testing.T) {
	vs := &fakeVouchers{}
	h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
	body := `{"title":"t","stock":1,"beginTime":"2026-01-01T08:00:00\u002B08:00","endTime":"\u0032027-01-01T00:00:00\u005A"}`
	w := serve(t, h, request{"POST", "/api/vouchers", admin, body})
	require.Equal(t, http.StatusCreated, w.Code, "body %s", w.Body)
	require.Len(t, vs.created, 1)
	v := vs.created[0]
	assert.True(t, v.BeginTime.Equal(mustTime(t, "2026-01-01T00:00:00Z")), "got beginTime %v, want 2026-01-01T00:00:00Z", v.BeginTime)
	assert.True(t, v.EndTime.Equal(mustTime(t, "2027-01-01T00:00:00Z")), "got endTime %v, want 2027-01-01T00:00:00Z", v.EndTime)

	body = `{"title":"t","stock":1,"beginTime":"2026-01-01T8:00:00\u002B08:00","endTime":"2027-01-01T00:00:00Z"}`
	w = serve(t, h, request{"POST", "/api/vouchers", admin, body})
	require.Equal(t, http.StatusBadRequest, w.Code, "body %s", w.Body)
	var e api.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
	assert.Contains(t, e.Error.Message, `"2026-01-01T8:00:00+08:00" is not an RFC 3339 date-time`)
	assert.Len(t, vs.created, 1, "a refused body reached the service")
}

// TestCreateVoucherBodyUnread: a body that could not be read in full (sent too slowly for the
// server's ReadTimeout, or cut off) is refused with 400 invalid_argument saying so, and the
// read's error, which names the server's own address, is not shown to the client.
func TestCreateVoucherBodyUnread(t *testing.T) {
	server := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}
	client := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40682}
	for name, cause := range map[string]error{
		"timeout": &net.OpError{Op: "read", Net: "tcp", Source: server, Addr: client, Err: os.ErrDeadlineExceeded},
		"cut off": io.ErrUnexpectedEOF,
		"reset":   &net.OpError{Op: "read", Net: "tcp", Source: server, Addr: client, Err: syscall.ECONNRESET},
	} {
		t.Run(name, func(t *testing.T) {
			vs := &fakeVouchers{}
			h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
			body := io.MultiReader(strings.NewReader(`{"title":"t",`), iotest.ErrReader(cause))
			req := httptest.NewRequest(http.MethodPost, "/api/vouchers", body)
			for k, v := range admin {
				req.Header.Set(k, v)
			}
			// Not serveRequest: it reads the body first, and would meet the error itself.
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, http.StatusBadRequest, w.Code, "body %s", w.Body)
			requireErrorBody(t, w, api.CodeInvalidArgument)
			assert.Contains(t, w.Body.String(), "could not be read")
			assert.NotContains(t, w.Body.String(), "10.1.2.3", "the server's address shown to the client")
			assert.NotContains(t, w.Body.String(), cause.Error())
			assert.Empty(t, vs.created)
		})
	}
}

// TestOrderRefusesBody: an order request with a body, of a known length or chunked, is
// refused before the service, and its connection closed, so that net/http does not wait
// for that body before it answers.
func TestOrderRefusesBody(t *testing.T) {
	for name, body := range map[string]io.Reader{
		"sized":   strings.NewReader("{}"),
		"chunked": io.MultiReader(strings.NewReader("{}")), // no length known: ContentLength -1
	} {
		t.Run(name, func(t *testing.T) {
			os := &fakeOrders{id: 1}
			h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, os)
			req := httptest.NewRequest(http.MethodPost, "/api/vouchers/1/orders", body)
			req.Header.Set(api.HeaderUserID, "42")
			w := serveRequest(t, h, req)
			require.Equal(t, http.StatusBadRequest, w.Code, "body %s", w.Body)
			requireErrorBody(t, w, api.CodeInvalidArgument)
			assert.Equal(t, "close", w.Header().Get("Connection"))
			assert.Empty(t, os.calls)
		})
	}
}

func TestGetVoucher(t *testing.T) {
	vs := &fakeVouchers{}
	h := api.NewServer(discardLog(), api.Config{}, vs, &fakeOrders{})

	w := serve(t, h, request{"GET", "/api/vouchers/9223372036854775807", nil, ""})

	require.Equal(t, http.StatusOK, w.Code, "status; body %s", w.Body)
	got := decodeJSON(t, w)
	for _, k := range []string{"id", "title", "stock", "beginTime", "endTime"} {
		assert.Contains(t, got, k)
	}
	assert.Equal(t, []int64{9223372036854775807}, vs.got, "ids asked of the service")
	assert.Equal(t, "2026-01-01T00:00:00Z", got["beginTime"])
}

func TestPlaceOrder(t *testing.T) {
	const id = int64(1)<<62 + 12345 // beyond 2^53: a JSON number would lose it
	os := &fakeOrders{id: id}
	h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, os)

	w := serve(t, h, request{"POST", "/api/vouchers/3/orders", map[string]string{api.HeaderUserID: "9223372036854775807"}, ""})

	require.Equal(t, http.StatusCreated, w.Code, "status; body %s", w.Body)
	assert.JSONEq(t, `{"orderId":"4611686018427400249"}`, w.Body.String())
	assert.Equal(t, []placed{{9223372036854775807, 3}}, os.calls)
}

// TestAlreadyOrderedCarriesTheOrderID: a 409 already_ordered names the user's existing order
// when the service could read it, and only then.
func TestAlreadyOrderedCarriesTheOrderID(t *testing.T) {
	const id = int64(1)<<62 + 5
	for _, tt := range []struct {
		name   string
		err    error
		wantID any
	}{
		{"read", &order.AlreadyOrderedError{OrderID: id}, "4611686018427387909"},
		{"read, wrapped", fmt.Errorf("place: %w", &order.AlreadyOrderedError{OrderID: id}), "4611686018427387909"},
		{"not read", order.ErrAlreadyOrdered, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, &fakeOrders{err: tt.err})
			w := serve(t, h, request{"POST", "/api/vouchers/1/orders", user42, ""})
			require.Equal(t, http.StatusConflict, w.Code, "body %s", w.Body)
			requireErrorBody(t, w, api.CodeAlreadyOrdered)
			var body map[string]map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
			assert.Equal(t, tt.wantID, body["error"]["orderId"])
		})
	}
}

func TestGetOrder(t *testing.T) {
	os := &fakeOrders{}
	h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, os)

	w := serve(t, h, request{"GET", "/api/orders/4611686018427387909", map[string]string{api.HeaderUserID: "9223372036854775807"}, ""})

	require.Equal(t, http.StatusOK, w.Code, "status; body %s", w.Body)
	assert.JSONEq(t, `{"orderId":"4611686018427387909","voucherId":3,"userId":"9223372036854775807","status":"created","createdAt":"2026-11-22T08:00:00Z"}`, w.Body.String())
	assert.Equal(t, []placed{{9223372036854775807, 4611686018427387909}}, os.got, "user and order id asked of the service")
}

// TestGetOrderStates: pending and failed orders (the asynchronous mode's) answer as the
// document says, a failed one with its reason.
func TestGetOrderStates(t *testing.T) {
	at := time.Date(2026, 11, 22, 8, 0, 0, 123e6, time.FixedZone("CST", 8*3600))
	for _, tt := range []struct {
		sum  order.Summary
		want string
	}{
		{order.Summary{ID: 5, UserID: 42, VoucherID: 3, State: order.StatePending, CreatedAt: at},
			`{"orderId":"5","voucherId":3,"userId":"42","status":"pending","createdAt":"2026-11-22T00:00:00.123Z"}`},
		{order.Summary{ID: 5, UserID: 42, VoucherID: 3, State: order.StateFailed, Reason: "the database refused it 5 times", CreatedAt: at},
			`{"orderId":"5","voucherId":3,"userId":"42","status":"failed","reason":"the database refused it 5 times","createdAt":"2026-11-22T00:00:00.123Z"}`},
	} {
		t.Run(string(tt.sum.State), func(t *testing.T) {
			h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, summaryOrders{tt.sum})
			w := serve(t, h, request{"GET", "/api/orders/5", user42, ""})
			require.Equal(t, http.StatusOK, w.Code, "body %s", w.Body)
			assert.JSONEq(t, tt.want, w.Body.String())
		})
	}
}

// summaryOrders answers Get with its summary.
type summaryOrders struct{ sum order.Summary }

func (summaryOrders) Place(context.Context, int64, int64) (int64, error) { return 0, nil }
func (o summaryOrders) Get(context.Context, int64, int64) (order.Summary, error) {
	return o.sum, nil
}

func TestHealth(t *testing.T) {
	errDown := errors.New("connection refused")
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return errDown }
	tests := []struct {
		name       string
		ready      map[string]api.Check
		want       int
		wantChecks map[string]any
	}{
		{"no checks", nil, 200, map[string]any{}},
		{"all up", map[string]api.Check{"database": up, "redis": up}, 200, map[string]any{"database": "ok", "redis": "ok"}},
		{"redis down", map[string]api.Check{"database": up, "redis": down}, 503, map[string]any{"database": "ok", "redis": errDown.Error()}},
		{"both down", map[string]api.Check{"database": down, "redis": down}, 503, map[string]any{"database": errDown.Error(), "redis": errDown.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := api.NewServer(discardLog(), api.Config{Ready: refreshed(tt.ready)}, &fakeVouchers{}, &fakeOrders{})

			w := serve(t, h, request{"GET", "/healthz", nil, ""})
			require.Equal(t, http.StatusOK, w.Code, "healthz does not depend on the checks")
			assert.JSONEq(t, `{"status":"ok"}`, w.Body.String())

			w = serve(t, h, request{"GET", "/readyz", nil, ""})
			require.Equal(t, tt.want, w.Code, "readyz; body %s", w.Body)
			got := decodeJSON(t, w)
			assert.Equal(t, tt.want == 200, got["ready"])
			assert.Equal(t, tt.wantChecks, got["checks"])
		})
	}
}

// refreshed is a Readiness over checks that has run them once.
func refreshed(checks map[string]api.Check) *api.Readiness {
	r := api.NewReadiness(discardLog(), checks)
	r.Refresh(context.Background())
	return r
}

// TestReadyzTimeout checks that a check that hangs is cut off and answers 503.
func TestReadyzTimeout(t *testing.T) {
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	h := api.NewServer(discardLog(), api.Config{Ready: refreshed(map[string]api.Check{"redis": hang})}, &fakeVouchers{}, &fakeOrders{})
	req := request{"GET", "/readyz", nil, ""}
	w := serve(t, h, req)
	require.Equal(t, http.StatusServiceUnavailable, w.Code, "body %s", w.Body)
	assert.Contains(t, w.Body.String(), context.DeadlineExceeded.Error())
}

func TestMetricsRoute(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up 1\n")) })
	h := api.NewServer(discardLog(), api.Config{Metrics: metrics}, &fakeVouchers{}, &fakeOrders{})
	w := serve(t, h, request{"GET", "/metrics", nil, ""})
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "up 1\n", w.Body.String())

	// Without a metrics handler the route is absent and answers like any unknown route.
	h = api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, &fakeOrders{})
	w = serve(t, h, request{"GET", "/metrics", nil, ""})
	require.Equal(t, http.StatusNotFound, w.Code)
	requireErrorBody(t, w, api.CodeNotFound)
}

// TestPanicAnswers500 checks the last resort: a panicking service answers a JSON 500.
func TestPanicAnswers500(t *testing.T) {
	h := api.NewServer(discardLog(), api.Config{}, &panicVouchers{}, &fakeOrders{})
	w := serve(t, h, request{"GET", "/api/vouchers/1", nil, ""})
	require.Equal(t, http.StatusInternalServerError, w.Code)
	requireErrorBody(t, w, api.CodeInternal)
}

type panicVouchers struct{ fakeVouchers }

func (*panicVouchers) Get(context.Context, int64) (voucher.Voucher, error) { panic("boom") }

// TestCreateVoucherBearerSchemeAnyCase: the authentication scheme is case-insensitive
// (RFC 9110, section 11.1), so "bearer" and "BEARER" carry the admin token as "Bearer" does.
func TestCreateVoucherBearerSchemeAnyCase(t *testing.T) {
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		t.Run(scheme, func(t *testing.T) {
			vs := &fakeVouchers{}
			h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
			hdr := map[string]string{"Authorization": scheme + " " + testToken, "Content-Type": "application/json"}
			w := serve(t, h, request{"POST", "/api/vouchers", hdr, validVoucherBody})
			require.Equal(t, http.StatusCreated, w.Code, "body %s", w.Body)
			assert.Len(t, vs.created, 1)
		})
	}
}

// TestCreateVoucherContentTypes: a JSON body is taken whatever the case of its media type and
// with parameters, its charset utf-8 in any case, quoted or not; the refusals are in
// TestErrorContract.
func TestCreateVoucherContentTypes(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8",
		`application/json; charset="utf-8"`, "application/json; CHARSET=Utf-8"} {
		vs := &fakeVouchers{}
		h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{})
		w := serve(t, h, request{"POST", "/api/vouchers", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": ct}, validVoucherBody})
		assert.Equal(t, http.StatusCreated, w.Code, "Content-Type %q: body %s", ct, w.Body)
	}
}
