package database_test

import (
	"errors"
	"fmt"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"

	"github.com/seckill/seckill/internal/database"
)

func TestIsDeadlock(t *testing.T) {
	deadlock := &mysqldriver.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"deadlock", deadlock, true},
		{"deadlock, wrapped", fmt.Errorf("insert order: %w", deadlock), true},
		{"lock wait timeout", &mysqldriver.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, false},
		{"duplicate key", &mysqldriver.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{"other error", errors.New("deadlock"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, database.IsDeadlock(tt.err), tt.name)
	}
}
