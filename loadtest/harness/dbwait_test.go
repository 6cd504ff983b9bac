package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDBWaitNamesTheBound: each way a hung database ends a call is told with the bound that
// struck; any other error is only wrapped. (TestVerifyHungDatabase provokes the first two
// against a frozen mariadbd.)
func TestDBWaitNamesTheBound(t *testing.T) {
	w, err := newDBWait("root:@tcp(127.0.0.1:16306)/x?timeout=1s", 5*time.Minute)
	require.NoError(t, err)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	addr, err := net.ResolveTCPAddr("tcp", "127.0.0.1:16306")
	require.NoError(t, err)
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: timeoutErr{}}
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"readTimeout", context.Background(), fmt.Errorf("open mysql: %w", mysql.ErrInvalidConn),
			"read x: the database did not answer within the DSN's readTimeout (5s), or dropped the connection: is it hung? (open mysql: invalid connection)"},
		{"deadline", expired, fmt.Errorf("open mysql: %w", context.DeadlineExceeded),
			"read x: no answer before the deadline (-timeout 5m0s): is it hung? (open mysql: context deadline exceeded)"},
		{"dial timeout", context.Background(), dialTimeout,
			"read x: the database did not accept a connection within the DSN's timeout (1s): is it up? (dial tcp 127.0.0.1:16306: i/o timeout)"},
		{"other", context.Background(), errors.New("Error 1146: Table 'x.seckill_vouchers' doesn't exist"),
			"read x: Error 1146: Table 'x.seckill_vouchers' doesn't exist"},
	}
	for _, tt := range tests {
		got := w.err(tt.ctx, "read x", tt.err)
		assert.EqualError(t, got, tt.want, tt.name)
		assert.ErrorIs(t, got, tt.err, tt.name)
	}
	_, err = newDBWait("root:@tcp(127.0.0.1:16306)/x?readTimeout=-1s", time.Minute)
	assert.ErrorContains(t, err, "readTimeout=-1s")
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
