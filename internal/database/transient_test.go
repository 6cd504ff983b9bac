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
		{"read-only (a failover)", fmt.Errorf("take stock: %w", &mysqldriver.MySQLError{Number: 1290, Message: "running with the --read-only option"}), true},
		{"read-only mode", &mysqldriver.MySQLError{Number: 1836, Message: "Running in read-only mode"}, true},
		{"too many connections", &mysqldriver.MySQLError{Number: 1040, Message: "Too many connections"}, true},
		{"max_user_connections", &mysqldriver.MySQLError{Number: 1203, Message: "has more than 'max_user_connections'"}, true},
		{"shutdown", &mysqldriver.MySQLError{Number: 1053, Message: "Server shutdown in progress"}, true},
		{"killed query", &mysqldriver.MySQLError{Number: 1317, Message: "Query execution was interrupted"}, true},
		{"killed connection", &mysqldriver.MySQLError{Number: 1927, Message: "Connection was killed"}, true},
		{"max_statement_time", &mysqldriver.MySQLError{Number: 1969, Message: "max_statement_time exceeded"}, true},
		{"max_execution_time", &mysqldriver.MySQLError{Number: 3024, Message: "maximum statement execution time exceeded"}, true},
		{"disk full", &mysqldriver.MySQLError{Number: 1021, Message: "Disk full"}, true},
		{"table full", &mysqldriver.MySQLError{Number: 1114, Message: "The table is full"}, true},
		{"duplicate key", &mysqldriver.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{"check constraint", &mysqldriver.MySQLError{Number: 4025, Message: "CONSTRAINT `stock` failed"}, false},
		{"other error", errors.New("invalid connection"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, database.IsTransient(tt.err), tt.name)
	}
}
