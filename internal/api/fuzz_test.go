package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/voucher"
)

// The fuzzers check the contract for any input: never a 5xx (nor a panic, which
// recoverJSON would turn into one), an error body on every error, and a 2xx exactly when
// the input is valid by an oracle written apart from the handlers.

// validID is the contract's "positive integer" that fits an int64, decided with math/big
// rather than strconv. An optional leading '+' is accepted, as strconv does.
func validID(s string) (int64, bool) {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() <= 0 || !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}

var idSeeds = []string{"1", "42", "9223372036854775807", "9223372036854775808", "0", "-1", "+7", "007",
	"", " 1", "1 ", "1.0", "1e3", "0x1f", "abc", "1/orders", "../1", "%31", "\x00", "１", "٣", "99999999999999999999999"}

// checkAnswer fails t when w is a 5xx, or an error without the error body.
func checkAnswer(t *testing.T, w interface {
	Result() *http.Response
}, body []byte) {
	t.Helper()
	code := w.Result().StatusCode
	require.Less(t, code, 500, "5xx for a client's input; body %s", body)
	if code >= 400 {
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(body, &e), "error body %q", body)
		require.NotEmpty(t, e.Error.Code, "error code; body %s", body)
		require.NotEmpty(t, e.Error.Message, "error message; body %s", body)
	}
}

// FuzzVoucherIDPath puts any string where an id goes in a path: the voucher's, and the
// order's of GET /api/orders/{orderId}.
func FuzzVoucherIDPath(f *testing.F) {
	for _, s := range idSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vs, os := &fakeVouchers{}, &fakeOrders{id: 1}
		h := api.NewServer(discardLog(), api.Config{}, vs, os)
		want, valid := validID(s)

		w := serve(t, h, request{"GET", "/api/vouchers/" + s, nil, ""})
		checkAnswer(t, w, w.Body.Bytes())
		if valid {
			require.Equal(t, http.StatusOK, w.Code, "GET voucher %q; body %s", s, w.Body)
			require.Equal(t, []int64{want}, vs.got, "ids asked of the service")
		} else {
			require.GreaterOrEqual(t, w.Code, 300, "GET voucher %q accepted; body %s", s, w.Body)
			require.Empty(t, vs.got, "an invalid id reached the service")
		}

		w = serve(t, h, request{"POST", "/api/vouchers/" + s + "/orders", user42, ""})
		checkAnswer(t, w, w.Body.Bytes())
		if valid {
			require.Equal(t, http.StatusCreated, w.Code, "order voucher %q; body %s", s, w.Body)
			require.Equal(t, []placed{{42, want}}, os.calls)
		} else {
			require.GreaterOrEqual(t, w.Code, 300, "order voucher %q accepted; body %s", s, w.Body)
			require.Empty(t, os.calls, "an invalid id reached the service")
		}

		w = serve(t, h, request{"GET", "/api/orders/" + s, user42, ""})
		checkAnswer(t, w, w.Body.Bytes())
		if valid {
			require.Equal(t, http.StatusOK, w.Code, "GET order %q; body %s", s, w.Body)
			require.Equal(t, []placed{{42, want}}, os.got, "user and order id asked of the service")
		} else {
			require.GreaterOrEqual(t, w.Code, 300, "GET order %q accepted; body %s", s, w.Body)
			require.Empty(t, os.got, "an invalid id reached the service")
		}
	})
}

func FuzzUserIDHeader(f *testing.F) {
	for _, s := range idSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		os := &fakeOrders{id: 1}
		h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, os)
		want, valid := validID(s)

		for _, r := range []struct {
			method, path string
			wantOK       int
			calls        *[]placed
			want         placed
		}{
			{"POST", "/api/vouchers/5/orders", http.StatusCreated, &os.calls, placed{want, 5}},
			{"GET", "/api/orders/5", http.StatusOK, &os.got, placed{want, 5}},
		} {
			w := serve(t, h, request{r.method, r.path, map[string]string{api.HeaderUserID: s}, ""})
			checkAnswer(t, w, w.Body.Bytes())
			switch {
			case valid:
				require.Equal(t, r.wantOK, w.Code, "%s %s, X-User-ID %q; body %s", r.method, r.path, s, w.Body)
				require.Equal(t, []placed{r.want}, *r.calls)
			case s == "":
				require.Equal(t, http.StatusUnauthorized, w.Code, "no X-User-ID; body %s", w.Body)
			default:
				require.Equal(t, http.StatusBadRequest, w.Code, "X-User-ID %q; body %s", s, w.Body)
				require.Empty(t, *r.calls, "an invalid user id reached the service")
			}
		}
	})
}

// voucherRequest is the documented body of POST /api/vouchers, for the oracle.
type voucherRequest struct {
	Title, SubTitle, Rules string
	PayValue, ActualValue  int64
	Stock                  *int
	BeginTime, EndTime     oracleTime
}

// rfc3339DateTime is RFC 3339's date-time (section 5.6), with its upper-case T and Z, and its
// time-numoffset's ranges: hour 00-23, minute 00-59.
var rfc3339DateTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

// oracleTime is a documented time: a JSON string, its escapes decoded like any other's, that
// is an RFC 3339 date-time (time.Time's own reading takes more: a one-digit hour, a comma
// before the fraction), read by time.Parse; or null, no time.
type oracleTime struct{ time.Time }

func (o *oracleTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil || string(b) == "null" {
		return o.Time.UnmarshalJSON(b) // null leaves it zero; what is no string is refused
	}
	if !rfc3339DateTime.MatchString(s) {
		return errors.New("not an RFC 3339 date-time")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	o.Time = t
	return err
}

// validVoucher reports whether body is a valid voucher by the API's documented rules: one
// JSON value and nothing after it but white space, no object naming a member twice, and the
// fields' own rules.
func validVoucher(body []byte) (voucherRequest, bool) {
	var r voucherRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil {
		return r, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return r, false // something after the value
	}
	if dup, err := duplicateName(json.NewDecoder(bytes.NewReader(body))); err != nil || dup {
		return r, false
	}
	if misnamed(body) {
		return r, false
	}
	// The window that is stored: UTC, to the millisecond.
	b, e := r.BeginTime.UTC().Truncate(time.Millisecond), r.EndTime.UTC().Truncate(time.Millisecond)
	ok := r.Stock != nil && *r.Stock >= 0 && *r.Stock <= voucher.MaxStock &&
		strings.TrimSpace(r.Title) != "" && utf8.RuneCountInString(r.Title) <= voucher.MaxTitleLen &&
		!hasControl(r.Title+r.SubTitle, "") && !hasControl(r.Rules, "\t\n\r") &&
		utf8.RuneCountInString(r.SubTitle) <= voucher.MaxTitleLen && utf8.RuneCountInString(r.Rules) <= voucher.MaxRulesLen &&
		r.PayValue >= 0 && r.ActualValue >= 0 &&
		b.Year() >= 2000 && e.Year() <= 9999 && e.After(b)
	return r, ok
}

// hasControl reports whether s has a control character (Unicode's Cc: U+0000–U+001F,
// U+007F–U+009F) other than those in allowed.
func hasControl(s, allowed string) bool {
	for _, r := range s {
		if (r <= 0x1f || (r >= 0x7f && r <= 0x9f)) && !strings.ContainsRune(allowed, r) {
			return true
		}
	}
	return false
}

// voucherMembers are the members of the voucher body as docs/openapi.yaml names them.
var voucherMembers = []string{"title", "subTitle", "rules", "payValue", "actualValue", "stock", "beginTime", "endTime"}

// misnamed reports whether the top-level object of body, which names no member twice, names
// one of voucherMembers in another case ("Stock" for "stock"): the API's names are exact,
// where encoding/json would match them regardless of case.
func misnamed(body []byte) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return false // no object: refused for that
	}
	for name := range members {
		for _, want := range voucherMembers {
			if name != want && fold(name) == fold(want) {
				return true
			}
		}
	}
	return false
}

// fold maps names that encoding/json matches to the same field to one string: each rune to
// upper(lower(r)).
func fold(name string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, name)
}

// duplicateName reports whether an object in the next JSON value of dec names a member
// twice. Names are compared as encoding/json matches them to fields: each rune folded to
// upper(lower(r)), so "title" and "TITLE" are the same member.
func duplicateName(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('['):
		for dec.More() {
			if dup, err := duplicateName(dec); dup || err != nil {
				return dup, err
			}
		}
	case json.Delim('{'):
		var seen []string
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return false, err
			}
			folded := fold(name.(string))
			if slices.Contains(seen, folded) {
				return true, nil
			}
			seen = append(seen, folded)
			if dup, err := duplicateName(dec); dup || err != nil {
				return dup, err
			}
		}
	default:
		return false, nil // a scalar
	}
	_, err = dec.Token() // the closing ] or }
	return false, err
}

// FuzzCreateVoucherBody posts any body to POST /api/vouchers over the real voucher service
// and the embedded SQLite database: a valid voucher is stored and answered as sent (times
// in UTC, to the millisecond), anything else is a 4xx.
func FuzzCreateVoucherBody(f *testing.F) {
	for _, s := range []string{
		validVoucherBody,
		`{"title":"秒杀","subTitle":"s","rules":"r","payValue":1,"actualValue":2,"stock":0,"beginTime":"2000-01-01T00:00:00Z","endTime":"9999-12-31T23:59:59.999Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00.123456789+08:00","endTime":"2026-01-01T00:00:00.124Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"9999-12-31T23:00:00-05:00"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00+24:00","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00-23:60"}`,
		`{"title":"t","stock":1,"beginTime":"2000-01-01T00:30:00+01:00","endTime":"2026-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-01T00:00:00.0001Z"}`,
		`{"title":"t","stock":100000001,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":-1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"payValue":-1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":" \u00a0","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"a\u0000b","subTitle":"s","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","rules":"1.\tone\r\n2.\u0085","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","rules":"1.\tone\r\n2.\ttwo","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2027-01-01T00:00:00Z","endTime":"2026-01-01T00:00:00Z"}`,
		`{"TITLE":"t","Stock":1,"begintime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"} trailing`,
		`{"title":"\ud800","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T8:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T08:00:00,5Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T08:00:00\u002B08:00","endTime":"\u0032027-01-01T00:00:00\u005a"}`,
		`{"title":"t","stock":1,"beginTime":"2026-01-01T\u0038:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1e2,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`null`, `[]`, `{}`, `{"stock":`, `"x"`, ``,
		// One value and nothing after it; no member named twice, in any case, at any depth.
		validVoucherBody + "\n\t ",
		validVoucherBody + validVoucherBody,
		validVoucherBody + ` {}`,
		`{"title":"t","stock":1,"stock":2,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","Title":"u","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"tİtle":"t","title":"u","stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"x":[{"a":1},{"a":1}],"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"x":[{"a":1,"A":2}],"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
		`{"title":"t","stock":1,"x":{"title":"a"},"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	db, err := database.OpenSQLite(context.Background(), f.TempDir(), database.Pool{})
	require.NoError(f, err)
	f.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(context.Background())
	require.NoError(f, err)
	h := api.NewServer(discardLog(), api.Config{AdminToken: testToken}, voucher.NewService(voucher.NewStore(db.DB)), &fakeOrders{})

	f.Fuzz(func(t *testing.T, body []byte) {
		w := serve(t, h, request{"POST", "/api/vouchers", admin, string(body)})
		checkAnswer(t, w, w.Body.Bytes())
		want, valid := validVoucher(body)
		if !valid {
			require.GreaterOrEqual(t, w.Code, 400, "invalid body %q accepted; answer %s", body, w.Body)
			return
		}
		require.Equal(t, http.StatusCreated, w.Code, "valid body %q refused; answer %s", body, w.Body)
		var got api.VoucherResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
		require.Positive(t, got.ID)
		require.Equal(t, want.Title, got.Title)
		require.Equal(t, *want.Stock, got.Stock)
		for _, tm := range []struct{ sent, got time.Time }{{want.BeginTime.Time, got.BeginTime}, {want.EndTime.Time, got.EndTime}} {
			require.Equal(t, tm.sent.UTC().Truncate(time.Millisecond), tm.got, "time sent %v", tm.sent)
		}

		w = serve(t, h, request{"GET", "/api/vouchers/" + strconv.FormatInt(got.ID, 10), nil, ""})
		require.Equal(t, http.StatusOK, w.Code, "GET the voucher just created; body %s", w.Body)
		var again api.VoucherResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &again))
		require.Equal(t, got, again, "GET answers what POST answered")
	})
}
