package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/docs"
	"github.com/seckill/seckill/internal/app"
)

// TestReadyzChecksDocumented: every check an instance's /readyz can answer, in every order
// mode and with a guard that adds one, is named in docs/openapi.yaml (the Readiness schema's
// checks), and so is every guard whose own backend the check "lock" covers.
func TestReadyzChecksDocumented(t *testing.T) {
	ctx := context.Background()
	spec, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	require.NoError(t, err)
	schema := spec.Components.Schemas["Readiness"].Value
	checksDoc := schema.Properties["checks"].Value.Description
	readyzDoc := spec.Paths.Find("/readyz").Get.Description

	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	seen := map[string]bool{}
	for _, cfg := range []app.Config{
		{Lock: "redlock"}, // the default deadline: 500 ms for each node to answer at start
		{Lock: "redis", OrderMode: app.ModeAsync},
	} {
		inst, err := app.New(ctx, discard, cfg, st)
		require.NoError(t, err)
		for name := range readyChecks(t, inst, 200) {
			seen[name] = true
		}
		require.NoError(t, inst.Close())
	}
	require.Subset(t, keys(seen), []string{"database", "redis", "lock", "writer"})
	for name := range seen {
		assert.Contains(t, checksDoc, "`"+name+"`", "the Readiness schema's checks do not name the check %q", name)
	}
	// The guards with a backend of their own (TestNewEveryLockKind): their check is "lock".
	for _, kind := range []string{"redlock", "zookeeper", "etcd"} {
		assert.True(t, strings.Contains(readyzDoc, "`"+kind+"`"), "/readyz's description does not name %q among the guards checked as \"lock\"", kind)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
