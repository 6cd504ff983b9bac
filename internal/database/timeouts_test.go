package database

import (
	"context"
	"net"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultTimeouts: a DSN without network timeouts gets the defaults; one that sets its
// own keeps them.
func TestDefaultTimeouts(t *testing.T) {
	tests := []struct {
		dsn                 string
		dial, read, written time.Duration
	}{
		{"root:@tcp(127.0.0.1:3306)/seckill", DefaultDialTimeout, DefaultReadTimeout, DefaultWriteTimeout},
		{"root:@tcp(127.0.0.1:3306)/seckill?timeout=1s&readTimeout=30s&writeTimeout=40s", time.Second, 30 * time.Second, 40 * time.Second},
		{"root:@tcp(127.0.0.1:3306)/seckill?readTimeout=30s", DefaultDialTimeout, 30 * time.Second, DefaultWriteTimeout},
	}
	for _, tt := range tests {
		cfg, err := mysqldriver.ParseDSN(tt.dsn)
		require.NoError(t, err)
		withDefaultTimeouts(cfg)
		assert.Equal(t, []time.Duration{tt.dial, tt.read, tt.written}, []time.Duration{cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout}, tt.dsn)
	}
}

// TestNegativeTimeoutsRefused: go-sql-driver applies only positive timeouts, so a negative one
// in the DSN turned the bound off (and, being non-zero, got no default either): against a
// server that accepts and never answers, the open hung as long as its context. Refused, and
// at once, naming the parameter.
func TestNegativeTimeoutsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() { // accepts and never answers: a frozen server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	for _, param := range []string{"timeout", "readTimeout", "writeTimeout"} {
		t.Run(param, func(t *testing.T) {
			// The context's deadline does not reach go-sql-driver's handshake: with
			// readTimeout=-1s the open hung past it, for good.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := OpenMySQL(ctx, "root:@tcp("+ln.Addr().String()+")/x?"+param+"=-1s", Pool{MaxOpen: 1})
				errc <- err
			}()
			select {
			case err := <-errc:
				require.Error(t, err)
				assert.ErrorContains(t, err, param+"=-1s", "refused, naming the parameter, before connecting")
			case <-time.After(3 * time.Second):
				t.Fatalf("OpenMySQL with %s=-1s still waiting on a server that never answers, past its context's deadline", param)
			}
		})
	}
}
