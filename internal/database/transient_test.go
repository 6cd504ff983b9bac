package database_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"

	"github.com/seckill/seckill/internal/database"
)

func TestIsTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"readTimeout during a lock wait", fmt.Errorf("wait for the writers of voucher 1: %w", mysqldriver.ErrInvalidConn), true},
		{"lock wait timeout", &mysqldriver.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, true},
		{"deadlock", fmt.Errorf("insert orders: %w", &mysqldriver.MySQLError{Number: 1213, Message: "Deadlock found"}), true},
		{"network", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true},
		{"deadline", fmt.Errorf("take stock: %w", context.DeadlineExceeded), true},
		{"embedded write lock", fmt.Errorf("%w: %w", database.ErrWriteLockBusy, context.DeadlineExceeded), true},
		{"duplicate key", &mysqldriver.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{"check constraint", &mysqldriver.MySQLError{Number: 4025, Message: "CONSTRAINT `stock` failed"}, false},
		{"other error", errors.New("invalid connection"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, database.IsTransient(tt.err), tt.name)
	}
}
