package database

import (
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
