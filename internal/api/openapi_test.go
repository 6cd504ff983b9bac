package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/docs"
	"github.com/seckill/seckill/internal/api"
)

// The API's tests send every request through serve, serveRequest or serveLater, which check the request
// and its answer against docs/openapi.yaml:
//   - the answer's status must be one the document lists for the operation, its body must
//     match that status's schema (error codes included: each status lists its own), and its
//     headers the declared ones;
//   - a request the document refuses (a missing X-User-ID, an id that is no integer, a
//     voucher body without a required member…) must be answered with a 4xx: a service that
//     accepts what the document forbids has drifted from it as surely as one that answers
//     what the document lacks;
//   - a request for a path or method the document lacks must be answered 404 not_found or
//     405 method_not_allowed.
// So the document cannot drift from the service without a test failing.

// contract is docs/openapi.yaml, loaded and validated once.
type contract struct {
	doc    *openapi3.T
	router routers.Router
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml is no valid OpenAPI 3: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route docs/openapi.yaml: %w", err)
	}
	return &contract{doc: doc, router: router}, nil
})

// validationOptions: every status must be listed; the bearer scheme is checked for its form
// only (the token's value is the service's business).
var validationOptions = &openapi3filter.Options{
	IncludeResponseStatus: true,
	MultiError:            true,
	AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		token, ok := api.BearerToken(in.RequestValidationInput.Request.Header.Get("Authorization"))
		if !ok || token == "" {
			return errors.New("no bearer token")
		}
		return nil
	},
}

// serveRequest serves req with h and checks both against the document.
func serveRequest(t testing.TB, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w, check := serveLater(t, h, req)
	check()
	return w
}

// serveLater serves req with h as serveRequest does, and returns the check against the
// document instead of running it: the concurrency tests run it once the race is over, so that
// validating (a millisecond under -race) takes no CPU from the orders still racing.
func serveLater(t testing.TB, h http.Handler, req *http.Request) (*httptest.ResponseRecorder, func()) {
	t.Helper()
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		require.NoError(t, err)
		req.Body = io.NopCloser(bytes.NewReader(body)) // ContentLength stays as it was
	}
	// The document sees a copy: the handler may consume or replace req's body.
	seen := req.Clone(context.Background())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	seen.Body = io.NopCloser(bytes.NewReader(body))
	if w.Header().Get("Content-Type") == "" && w.Body.Len() > 0 {
		// As net/http does on the wire, for a handler that set none (the metrics fake).
		w.Header().Set("Content-Type", http.DetectContentType(w.Body.Bytes()))
	}
	return w, func() {
		t.Helper()
		if err := checkContract(seen, w); err != nil {
			// Errorf, not FailNow: a check may run in a test's goroutine.
			t.Errorf("docs/openapi.yaml and the service disagree on %s %q: %v\nanswer %d %s", req.Method, req.URL.Path, err, w.Code, w.Body)
		}
	}
}

// checkContract reports how req and its answer w disagree with the document.
func checkContract(req *http.Request, w *httptest.ResponseRecorder) error {
	c, err := loadContract()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if req.Method == http.MethodHead {
		// HEAD on a GET route is the GET, without the body on the wire (the document's
		// description); a recorder keeps the body, so the GET's schema applies.
		req = req.Clone(ctx)
		req.Method = http.MethodGet
	}
	route, params, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return c.checkUnrouted(w, http.StatusMethodNotAllowed, "MethodNotAllowedError")
	case err != nil && strings.Contains(req.URL.Path, "//") && w.Code == http.StatusBadRequest:
		// An empty id ("/api/vouchers//orders") matches no route of the document, but gin's
		// router, and the handler refuses the id.
		return c.checkUnrouted(w, http.StatusBadRequest, "InvalidArgumentError")
	case err != nil && w.Code == http.StatusMethodNotAllowed && c.lacksMethodWithID(req):
		// The same route, sent a method it lacks ("GET /api/vouchers//orders"): gin answers
		// 405 before any handler reads the id, as for any id.
		return c.checkUnrouted(w, http.StatusMethodNotAllowed, "MethodNotAllowedError")
	case err != nil:
		return c.checkUnrouted(w, http.StatusNotFound, "NotFoundError")
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: validationOptions}
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil && (w.Code < 400 || w.Code >= 500) {
		return fmt.Errorf("the document refuses the request (%v), the service answered %d", reqErr, w.Code)
	}
	return openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 w.Code,
		Header:                 w.Header(),
		Body:                   io.NopCloser(bytes.NewReader(w.Body.Bytes())),
		Options:                validationOptions,
	})
}

// lacksMethodWithID reports whether req's path has an empty segment where an id goes, and
// is, with an id there, a path of the document that lacks req's method.
func (c *contract) lacksMethodWithID(req *http.Request) bool {
	if !strings.Contains(req.URL.Path, "//") {
		return false
	}
	withID := req.Clone(context.Background())
	withID.URL.Path = strings.Replace(req.URL.Path, "//", "/1/", 1)
	_, _, err := c.router.FindRoute(withID)
	return errors.Is(err, routers.ErrMethodNotAllowed)
}

// checkUnrouted checks the answer to a path or method that the document has no operation
// for: want with the error schema named (never a redirect: the document's description).
func (c *contract) checkUnrouted(w *httptest.ResponseRecorder, want int, schema string) error {
	if w.Code != want {
		return fmt.Errorf("no such operation in the document: want %d, the service answered %d", want, w.Code)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("content type %q, want application/json", ct)
	}
	var v any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		return fmt.Errorf("body is no JSON: %w", err)
	}
	return c.doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.MultiErrors())
}

// TestContractCatchesDrift checks the checker: answers and requests that the document does
// not allow are reported, those it allows are not.
func TestContractCatchesDrift(t *testing.T) {
	const placed = `{"orderId":"4611686018427387909"}`
	errBody := func(code, extra string) string {
		return `{"error":{"code":"` + code + `","message":"m"` + extra + `}}`
	}
	tests := []struct {
		name         string
		method, path string
		header       map[string]string
		status       int
		body         string
		wantErr      string // empty: the document allows it
	}{
		{"order placed", "POST", "/api/vouchers/1/orders", user42, 201, placed, ""},
		{"order admitted", "POST", "/api/vouchers/1/orders", user42, 202, `{"orderId":"5","status":"pending"}`, ""},
		{"already ordered with its id", "POST", "/api/vouchers/1/orders", user42, 409, errBody("already_ordered", `,"orderId":"5"`), ""},
		{"already ordered without", "POST", "/api/vouchers/1/orders", user42, 409, errBody("already_ordered", ""), ""},
		{"a status the operation lacks", "POST", "/api/vouchers/1/orders", user42, 418, errBody("sold_out", ""), "status is not supported"},
		{"a code the status lacks", "POST", "/api/vouchers/1/orders", user42, 409, errBody("not_found", ""), "allowed values"},
		{"an unknown code", "GET", "/api/vouchers/1", nil, 404, errBody("no_such_voucher", ""), "allowed values"},
		{"an id with another code", "POST", "/api/vouchers/1/orders", user42, 409, errBody("sold_out", `,"orderId":"5"`), "doesn't match"},
		{"already ordered with a malformed id", "POST", "/api/vouchers/1/orders", user42, 409, errBody("already_ordered", `,"orderId":"05"`), "orderId"},
		{"an order id as a number", "POST", "/api/vouchers/1/orders", user42, 201, `{"orderId":4611686018427387909}`, "orderId"},
		{"an extra member", "POST", "/api/vouchers/1/orders", user42, 201, `{"orderId":"5","voucherId":1}`, "voucherId"},
		{"an order without status", "GET", "/api/orders/5", user42, 200, `{"orderId":"5","voucherId":1,"userId":"42","createdAt":"2026-11-22T08:00:00Z"}`, "status"},
		{"an order in an unknown status", "GET", "/api/orders/5", user42, 200, `{"orderId":"5","voucherId":1,"userId":"42","status":"paid","createdAt":"2026-11-22T08:00:00Z"}`, "status"},
		{"a refused request accepted", "POST", "/api/vouchers/1/orders", nil, 201, placed, "the document refuses the request"},
		{"an unknown route answered", "GET", "/api/nope", nil, 200, `{}`, "want 404"},
		{"a wrong method answered", "DELETE", "/api/vouchers/1", nil, 404, errBody("not_found", ""), "want 405"},
		{"an empty id, a method its route lacks", "GET", "/api/vouchers//orders", user42, 405, errBody("method_not_allowed", ""), ""},
		{"an empty id, its route's method answered 405", "POST", "/api/vouchers//orders", user42, 405, errBody("method_not_allowed", ""), "want 404"},
		{"no route at all answered 405", "GET", "/api//nope", nil, 405, errBody("method_not_allowed", ""), "want 404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(tt.status)
			_, _ = w.WriteString(tt.body)
			err := checkContract(req, w)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "the document allows it")
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestContractListsEveryErrorCode: the document's error codes are exactly the constants
// declared in errors.go and the codes nginx answers itself (deploy/nginx/nginx.conf), read
// from their sources so that a new code cannot be forgotten.
func TestContractListsEveryErrorCode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "code") && lit.Kind == token.STRING {
					code, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					codes = append(codes, code)
				}
			}
		}
	}
	require.NotEmpty(t, codes, "no code constants in errors.go")
	conf, err := os.ReadFile("../../deploy/nginx/nginx.conf")
	require.NoError(t, err)
	fromNginx := regexp.MustCompile(`"code":"([^"]+)"`).FindAllSubmatch(conf, -1)
	require.NotEmpty(t, fromNginx, "no error bodies in nginx.conf")
	for _, m := range fromNginx {
		if !slices.Contains(codes, string(m[1])) {
			codes = append(codes, string(m[1]))
		}
	}
	c, err := loadContract()
	require.NoError(t, err)
	var listed []string
	for _, v := range c.doc.Components.Schemas["ErrorDetail"].Value.Properties["code"].Value.Enum {
		listed = append(listed, v.(string))
	}
	assert.ElementsMatch(t, codes, listed, "codes in errors.go and nginx.conf vs ErrorDetail.code in docs/openapi.yaml")
}

// TestContractListsNginxRoutes: a location that nginx answers itself and that a client can
// reach (an exact location, not internal) is a path of the document, as the instances'
// routes are: docs/openapi.yaml is the API as nginx exposes it.
func TestContractListsNginxRoutes(t *testing.T) {
	conf, err := os.ReadFile("../../deploy/nginx/nginx.conf")
	require.NoError(t, err)
	exact := regexp.MustCompile(`(?m)^\s*location = (\S+) \{\s*\n\s*(\S+)`)
	c, err := loadContract()
	require.NoError(t, err)
	var reachable []string
	for _, m := range exact.FindAllSubmatch(conf, -1) {
		if string(m[2]) == "internal;" {
			continue
		}
		reachable = append(reachable, string(m[1]))
		assert.NotNil(t, c.doc.Paths.Find(string(m[1])), "nginx answers %s itself; docs/openapi.yaml lacks it", m[1])
	}
	require.NotEmpty(t, reachable, "no location of nginx's own that a client can reach: is the pattern stale?")
}

// TestServesTheDocument: GET /api/openapi.yaml answers the document itself.
func TestServesTheDocument(t *testing.T) {
	h := api.NewServer(discardLog(), api.Config{}, &fakeVouchers{}, &fakeOrders{})
	w := serve(t, h, request{"GET", "/api/openapi.yaml", nil, ""})
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/yaml", w.Header().Get("Content-Type"))
	assert.Equal(t, docs.OpenAPI, w.Body.Bytes())
}

// TestContractRefusesControlCharacters: the document's voucher body refuses what the service
// refuses (voucher.Service's check): a control character in title or subTitle, one in rules
// other than tab and line breaks; rules with those pass.
func TestContractRefusesControlCharacters(t *testing.T) {
	const window = `"stock":1,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"`
	created := func(rules string) string {
		return `{"id":1,"title":"t","subTitle":"","rules":` + rules + `,"payValue":0,"actualValue":0,` + window +
			`,"createdAt":"2026-01-01T00:00:00Z"}`
	}
	for _, tc := range []struct {
		name, body, rules, wantErr string
	}{
		{"NUL in title", `{"title":"a\u0000b",` + window + `}`, `""`, "the document refuses the request"},
		{"C1 control in subTitle", `{"title":"t","subTitle":"a\u0085",` + window + `}`, `""`, "the document refuses the request"},
		{"line break in subTitle", `{"title":"t","subTitle":"a\nb",` + window + `}`, `""`, "the document refuses the request"},
		{"NUL in rules", `{"title":"t","rules":"a\u0000",` + window + `}`, `"a\u0000"`, "the document refuses the request"},
		{"tabs and line breaks in rules", `{"title":"t","rules":"1.\tone\r\n2.\ttwo",` + window + `}`, `"1.\tone\r\n2.\ttwo"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/api/vouchers", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer secret")
			w := httptest.NewRecorder()
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.WriteString(created(tc.rules))
			err := checkContract(req, w)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
