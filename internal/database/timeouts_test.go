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
	addr := silentServer(t)
	for _, param := range []string{"timeout", "readTimeout", "writeTimeout"} {
		t.Run(param, func(t *testing.T) {
			// With readTimeout=-1s the open hung past the context's deadline, for good
			// (GORM's version query at the open took no context; see TestOpenEndsAtDeadline).
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := OpenMySQL(ctx, "root:@tcp("+addr+")/x?"+param+"=-1s", Pool{MaxOpen: 1})
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

// TestMySQLTimeouts: what a caller is told of the timeouts OpenMySQL gives a DSN: its own, or
// the defaults; a DSN that OpenMySQL refuses is refused.
func TestMySQLTimeouts(t *testing.T) {
	got, err := MySQLTimeouts("root:@tcp(127.0.0.1:3306)/seckill?readTimeout=30s")
	require.NoError(t, err)
	assert.Equal(t, Timeouts{Dial: DefaultDialTimeout, Read: 30 * time.Second, Write: DefaultWriteTimeout}, got)
	for _, dsn := range []string{"root:@tcp(127.0.0.1:3306)/seckill?readTimeout=-1s", "root:@tcp(127.0.0.1:3306/seckill"} {
		_, err := MySQLTimeouts(dsn)
		assert.ErrorContains(t, err, "bad DSN", dsn)
	}
}

// silentServer listens on a 127.0.0.1 port, accepts every connection and never answers, as a
// frozen server does, and returns its address.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return ln.Addr().String()
}

// TestOpenEndsAtDeadline: OpenMySQL's context bounds the open. GORM's MySQL dialector asks
// the server's version with context.Background when it opens, so against a server that never
// answers the open waited for the DSN's readTimeout (here a minute, as a DSN raised for a long
// migration has), past its context's deadline.
func TestOpenEndsAtDeadline(t *testing.T) {
	addr := silentServer(t)
	const deadline = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := OpenMySQL(ctx, "root:@tcp("+addr+")/x?readTimeout=1m", Pool{MaxOpen: 1})
		errc <- err
	}()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(deadline + 5*time.Second):
		t.Fatalf("OpenMySQL still waiting on a server that never answers, %s past its context's deadline", 5*time.Second)
	}
}
