package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
)

// TestDeclaredBodyOverTheLimit: a voucher POST whose Content-Length is over the body limit is
// refused 413 payload_too_large as soon as its headers are in, without a byte of the body
// read: with "Expect: 100-continue" no "100 Continue" invites the body first, and without it
// the answer does not wait for a body sent slowly. The test sends the headers alone and
// reads the first answer on the connection; the connection is not kept for another request.
func TestDeclaredBodyOverTheLimit(t *testing.T) {
	vs := &fakeVouchers{}
	srv := httptest.NewServer(api.NewServer(discardLog(), api.Config{AdminToken: testToken}, vs, &fakeOrders{}))
	t.Cleanup(srv.Close)
	for _, expect := range []string{"Expect: 100-continue\r\n", ""} {
		t.Run(fmt.Sprintf("%q", expect), func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = fmt.Fprintf(c, "POST /api/vouchers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n", testToken, 64<<10+1, expect)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err, "no answer before the body was sent")
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "the first answer; body %q", body)
			assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
			var got api.ErrorBody
			require.NoError(t, json.Unmarshal(body, &got), "body %q", body)
			assert.Equal(t, api.CodeTooLarge, got.Error.Code)
			assert.True(t, resp.Close || strings.EqualFold(resp.Header.Get("Connection"), "close"), "the connection is kept, its body unread")
			assert.Empty(t, vs.created)
		})
	}
}
