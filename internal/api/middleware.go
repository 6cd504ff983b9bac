package api

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// recoverJSON turns a panic into a logged JSON 500 instead of a dropped connection. No input
// should reach it; the tests and the fuzzers look for it.
func recoverJSON(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if v := recover(); v != nil {
				log.Error("panic in handler", "path", c.Request.URL.Path, "panic", v)
				writeError(c, statusCode{http.StatusInternalServerError, codeInternal}, "internal error")
			}
		}()
		c.Next()
	}
}

// limitBody caps request bodies at n bytes. A body whose Content-Length is already over n is
// refused before a byte of it is read: it reads as over the limit at once, so a handler that
// reads it answers 413 as it does for any body too large, and net/http never sends the
// "100 Continue" a client with "Expect: 100-continue" waits for (it sends it on the body's
// first read), nor waits for a body sent slowly. The connection is closed after the answer:
// kept, net/http would first read the unread body (up to 256 KiB) to reach the next request.
func limitBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		switch {
		case c.Request.ContentLength > n:
			c.Header("Connection", "close")
			c.Request.Body = overLimit{limit: n}
		case c.Request.Body != nil:
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		}
		c.Next()
	}
}

// overLimit is the body of a request that declared more than limit bytes: reading it fails
// with the error http.MaxBytesReader gives past its limit, without reading the client's body.
type overLimit struct{ limit int64 }

func (b overLimit) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: b.limit} }

func (overLimit) Close() error { return nil }

// requireAdmin admits only "Authorization: Bearer <token>", the scheme in any case (an
// authentication scheme is case-insensitive). With no token configured it refuses everyone,
// so an unconfigured server cannot be used to create vouchers. The header sent more than once
// is refused (400), as X-User-ID is: gin's GetHeader reads the first line, a proxy may check
// the last, or both joined.
func requireAdmin(token string) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.GetHeader("Authorization")
		got, ok := bearerToken(h)
		switch {
		case len(c.Request.Header.Values("Authorization")) > 1:
			writeError(c, statusCode{http.StatusBadRequest, codeInvalidArgument}, "header Authorization must be sent once")
		case h == "" || !ok:
			writeError(c, statusCode{http.StatusUnauthorized, codeUnauthenticated}, "admin bearer token required")
		case token == "":
			writeError(c, statusCode{http.StatusForbidden, codeForbidden}, "admin API disabled: no admin token configured")
		case subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1:
			writeError(c, statusCode{http.StatusUnauthorized, codeUnauthenticated}, "invalid admin token")
		default:
			c.Next()
		}
	}
}

// deadline bounds the rest of the request to d: the context the handler hands the services
// ends then, so a store that hangs is given up and answered 503 unavailable (writeServiceError)
// instead of holding the request for as long as its driver's own timeouts allow.
func deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// bearerToken returns what follows the scheme of an "Authorization: Bearer <token>" value,
// matching the scheme without regard to case, and reports whether the scheme is Bearer.
func bearerToken(h string) (string, bool) {
	const scheme = "Bearer "
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return h[len(scheme):], true
}
