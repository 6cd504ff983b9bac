package testenv

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestPingFailure(t *testing.T) {
	cfg := &mysql.Config{User: "root", Addr: "127.0.0.1:3306"}
	for _, tc := range []struct {
		name string
		err  error
		want []string // in the message, beside the driver's error
	}{
		{"wrong password", &mysql.MySQLError{Number: 1045, Message: "Access denied for user 'root'@'localhost' (using password: NO)"},
			[]string{`access denied for user "root"`, "README.md", "SECKILL_TEST_MYSQL_DSN='seckill:seckill@tcp(127.0.0.1:3306)/'"}},
		{"root over the socket only", fmt.Errorf("ping: %w", &mysql.MySQLError{Number: 1698, Message: "Access denied for user 'root'@'localhost'"}),
			[]string{`access denied for user "root"`, "README.md", "SECKILL_TEST_MYSQL_DSN='seckill:seckill@tcp(127.0.0.1:3306)/'"}},
		{"too many connections", &mysql.MySQLError{Number: 1040, Message: "Too many connections"},
			[]string{"answered with an error"}},
		{"connection refused", errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"),
			[]string{"unreachable"}},
		{"driver bad connection", mysql.ErrInvalidConn,
			[]string{"unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := pingFailure(cfg, tc.err)
			for _, want := range append(tc.want, tc.err.Error(), "127.0.0.1:3306") {
				if !strings.Contains(msg, want) {
					t.Errorf("got %q, want %q in it", msg, want)
				}
			}
			for _, other := range []string{"access denied", "answered with an error", "unreachable"} {
				if !strings.Contains(tc.want[0], other) && strings.Contains(msg, other) {
					t.Errorf("got %q, want no %q in it", msg, other)
				}
			}
		})
	}
}
