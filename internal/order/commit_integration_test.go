//go:build integration

package order_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// freezingProxy forwards MySQL connections to a server until, once armed, a client sends a
// query that carries COMMIT (on MySQL the order sends it after its stock update, in one
// query): from then on that connection goes silent both ways (nothing more reaches the server,
// no answer comes back), as if the server had frozen just as the commit arrived. Closing the
// client side closes the server side, which rolls the transaction back there.
type freezingProxy struct {
	addr   string
	armed  atomic.Bool
	frozen chan struct{} // closed when a COMMIT was caught
	once   sync.Once
}

func startFreezingProxy(t *testing.T, server string) *freezingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezingProxy{addr: ln.Addr().String(), frozen: make(chan struct{})}
	var conns sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				p.serve(c, server)
			}()
		}
	}()
	return p
}

// commitPacket is what a query that commits carries.
var commitPacket = []byte("COMMIT")

func (p *freezingProxy) serve(client net.Conn, server string) {
	defer client.Close()
	up, err := net.Dial("tcp", server)
	if err != nil {
		return
	}
	defer up.Close()
	var silent atomic.Bool
	go func() { // server → client, until this connection is frozen
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 && !silent.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for { // client → server; returns (closing the server side) when the client hangs up
		n, err := client.Read(buf)
		if n > 0 && !silent.Load() {
			if p.armed.Load() && bytes.Contains(buf[:n], commitPacket) {
				silent.Store(true)
				p.once.Do(func() { close(p.frozen) })
			} else if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestCommitCaughtByFreezeEndsAtDeadline: an order whose COMMIT meets a server that stopped
// answering ends at the order's deadline, not at the driver's read timeout (10 s here): the
// commit runs on the order's context, which closes the connection when it is done. Nothing
// was committed, and the connection's close rolls the transaction back on the server, so
// the voucher's row is free again for the next order.
func TestCommitCaughtByFreezeEndsAtDeadline(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	direct, err := database.OpenMySQL(ctx, dsn, database.Pool{MaxOpen: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = direct.Close() })
	_, err = direct.Migrate(ctx)
	require.NoError(t, err)
	vid := newVoucher(t, direct, 5)

	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	proxy := startFreezingProxy(t, cfg.Addr)
	cfg.Addr, cfg.ReadTimeout, cfg.WriteTimeout = proxy.addr, 10*time.Second, 10*time.Second
	proxied, err := database.OpenMySQL(ctx, cfg.FormatDSN(), database.Pool{MaxOpen: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxied.Close() })
	s := order.NewSQLStore(proxied)
	require.NoError(t, s.Create(ctx, newOrder(1, 10, vid), order.Fence{}, nil), "an order before the freeze")

	proxy.armed.Store(true)
	const deadline = 2 * time.Second // BEGIN, UPDATE and INSERT through the proxy first, under -race
	octx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	err = s.Create(octx, newOrder(2, 11, vid), order.Fence{}, nil)
	took := time.Since(start)
	select {
	case <-proxy.frozen:
	default:
		t.Fatal("the order never sent COMMIT: the test froze nothing")
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, took, deadline+time.Second, "the order outlived its deadline by more than a second (the driver's read timeout is 10 s)")

	// The frozen COMMIT never reached the server: no order 2, and its row lock went with the
	// closed connection, so another order of the voucher goes through (within a bound).
	s2 := order.NewSQLStore(direct)
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	require.NoError(t, s2.Create(wctx, newOrder(3, 12, vid), order.Fence{}, nil), "the voucher's row stayed locked")
	stock, orders := stockOf(t, direct, vid)
	assert.Equal(t, int64(2), orders, "orders 1 and 3 only")
	assert.Equal(t, 3, stock)
}
