package testenv

import (
	"maps"
	"slices"
	"testing"

	"github.com/seckill/seckill/internal/database"
)

// TestRealOnly: with SECKILL_TEST_REAL_ONLY=1 an integration build runs the per-store tests on
// the real stores alone; a build without the tag has only the embedded ones, and keeps them.
func TestRealOnly(t *testing.T) {
	for _, tc := range []struct {
		env              string
		redis, databases []string
	}{
		{"", map[bool][]string{true: {"embedded", "real"}, false: {"embedded"}}[Integration],
			map[bool][]string{true: {"mysql", "sqlite"}, false: {"sqlite"}}[Integration]},
		{"1", map[bool][]string{true: {"real"}, false: {"embedded"}}[Integration],
			map[bool][]string{true: {"mysql"}, false: {"sqlite"}}[Integration]},
	} {
		t.Run("SECKILL_TEST_REAL_ONLY="+tc.env, func(t *testing.T) {
			t.Setenv("SECKILL_TEST_REAL_ONLY", tc.env)
			var redis []string
			for _, s := range RedisServers(t) {
				redis = append(redis, s.Name)
			}
			if !slices.Equal(redis, tc.redis) {
				t.Errorf("RedisServers: got %v, want %v", redis, tc.redis)
			}
			if got := slices.Sorted(maps.Keys(Databases(t, database.Pool{}))); !slices.Equal(got, tc.databases) {
				t.Errorf("Databases: got %v, want %v", got, tc.databases)
			}
		})
	}
}
