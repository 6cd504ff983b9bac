package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadOrders(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []k6Order
		wantErr string
	}{
		{
			name: "k6 json log records wrapping the script's lines",
			in: `{"level":"info","msg":"{\"order\":{\"id\":\"7312123456789012345\",\"user\":1000000001,\"voucher\":7,\"scenario\":\"storm\"}}","time":"2026-11-22T00:06:03Z"}
{"level":"warning","msg":"Request Failed","time":"2026-11-22T00:06:03Z"}

{"level":"info","msg":"{\"order\":{\"id\":\"42\",\"user\":5,\"voucher\":8,\"scenario\":\"sellout\"}}","time":"2026-11-22T00:06:04Z"}
`,
			want: []k6Order{
				{ID: "7312123456789012345", User: 1000000001, Voucher: 7, Scenario: "storm"},
				{ID: "42", User: 5, Voucher: 8, Scenario: "sellout"},
			},
		},
		{
			name: "bare script lines",
			in:   `{"order":{"id":"9","user":1,"voucher":2,"scenario":"storm"}}` + "\n",
			want: []k6Order{{ID: "9", User: 1, Voucher: 2, Scenario: "storm"}},
		},
		{name: "empty", in: "", want: nil},
		{name: "truncated line", in: `{"level":"info","msg":"{\"order\":{\"id\":`, wantErr: "line 1"},
		{name: "id not decimal", in: `{"order":{"id":"1e9","user":1,"voucher":2}}`, wantErr: "bad order"},
		{name: "id as a number loses precision", in: `{"order":{"id":7312123456789012345,"user":1,"voucher":2}}`, wantErr: "line 1"},
		{name: "user missing", in: `{"order":{"id":"9","voucher":2}}`, wantErr: "bad order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readOrders(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "orders: got %v, want %v", got, tt.want)
		})
	}
}

func TestReadSummary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	s, err := readSummary(write("ok.json", `{"lock":"local","vouchers":[{"scenario":"storm","id":3,"stock":1200},{"scenario":"sellout","id":4,"stock":900}],"scenarios":{}}`))
	require.NoError(t, err)
	assert.Equal(t, "local", s.Lock)
	assert.Equal(t, []k6Voucher{{Scenario: "storm", ID: 3, Stock: 1200}, {Scenario: "sellout", ID: 4, Stock: 900}}, s.Vouchers)

	// Each voucher carries its scenario's sold_out answers, as k6's handleSummary counted them,
	// and whether setup() marked it as meant to sell out.
	s, err = readSummary(write("soldout.json", `{"vouchers":[{"scenario":"storm","id":3,"stock":1200,"sellsOut":false},{"scenario":"sellout","id":4,"stock":900,"sellsOut":true}],
		"scenarios":{"storm":{"results":{"created":1200,"sold_out":0}},"sellout":{"results":{"created":900,"sold_out":3600}}}}`))
	require.NoError(t, err)
	assert.Equal(t, []k6Voucher{{Scenario: "storm", ID: 3, Stock: 1200}, {Scenario: "sellout", ID: 4, Stock: 900, SellsOut: true, SoldOut: 3600}}, s.Vouchers)

	for name, body := range map[string]string{
		"novouchers.json": `{"lock":"redis","vouchers":[]}`,
		"nostock.json":    `{"vouchers":[{"scenario":"storm","id":3,"stock":0}]}`,
		"broken.json":     `{"vouchers":`,
	} {
		_, err := readSummary(write(name, body))
		assert.Error(t, err, name)
	}
}

func TestInstanceURLs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "instances")
	require.NoError(t, os.WriteFile(p, []byte("http://127.0.0.1:18081\nhttp://127.0.0.1:18082/\n"), 0o644))
	got, err := instanceURLs("", p)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:18081", "http://127.0.0.1:18082"}, got)

	got, err = instanceURLs(" http://a:1 , http://b:2", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a:1", "http://b:2"}, got)

	_, err = instanceURLs("", "")
	assert.Error(t, err)
}

func TestCreateDatabaseRefusesUnsafeNames(t *testing.T) {
	for _, dsn := range []string{
		"root:@tcp(127.0.0.1:1)/",              // no name
		"root:@tcp(127.0.0.1:1)/a-b",           // not an identifier we splice
		"root:@tcp(127.0.0.1:1)/x`; DROP x; `", // injection
	} {
		_, err := createDatabase(t.Context(), dsn)
		require.Error(t, err, dsn)
		assert.Contains(t, err.Error(), "database name", dsn)
	}
}
