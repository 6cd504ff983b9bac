package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// k6LogWithVouchers is k6's console output of a run killed in its flash peak: setup()'s
// voucher records, orders, k6's own records, and a last line torn by the kill.
const k6LogWithVouchers = `{"level":"info","msg":"{\"voucher\":{\"scenario\":\"storm\",\"id\":7}}","source":"console","time":"2026-11-26T22:00:46Z"}
{"level":"info","msg":"{\"voucher\":{\"scenario\":\"sellout\",\"id\":8}}","source":"console","time":"2026-11-26T22:00:46Z"}
{"voucher":{"scenario":"flash","id":9}}
{"level":"info","msg":"{\"order\":{\"id\":\"42\",\"user\":5,\"voucher\":7,\"scenario\":\"storm\"}}","time":"2026-11-26T22:00:47Z"}
{"level":"warning","msg":"Request Failed","time":"2026-11-26T22:00:48Z"}
{"level":"info","msg":"{\"order\":{\"id\":\"43\",\"us`

// TestEndSalesIDs: end-sales takes the ids named, then those the k6 console output records as
// created, whatever else it holds (orders, k6's records, a torn last line); a file it cannot
// read is an error rather than nothing to end, which would leave the run's vouchers on sale
// without a word.
func TestEndSalesIDs(t *testing.T) {
	dir := t.TempDir()
	k6Log := filepath.Join(dir, "orders.log")
	require.NoError(t, os.WriteFile(k6Log, []byte(k6LogWithVouchers), 0o644))
	for _, tt := range []struct {
		name    string
		args    []string
		k6Log   string
		want    []int64
		wantErr string
	}{
		{"ids", []string{"3", "4"}, "", []int64{3, 4}, ""},
		{"a k6 log", nil, k6Log, []int64{7, 8, 9}, ""},
		{"both", []string{"3"}, k6Log, []int64{3, 7, 8, 9}, ""},
		{"nothing", nil, "", []int64{}, ""},
		{"id not a number", []string{"x"}, k6Log, nil, `voucher id "x"`},
		{"no k6 log there", nil, filepath.Join(dir, "missing.log"), nil, "read created vouchers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := endSalesIDs(tt.args, tt.k6Log)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestReadOrdersSkipsVoucherRecords: the verifier reads the same console output, and setup()'s
// voucher records are no orders.
func TestReadOrdersSkipsVoucherRecords(t *testing.T) {
	whole := k6LogWithVouchers[:strings.LastIndex(k6LogWithVouchers, "\n")] // without the torn line
	got, err := readOrders(strings.NewReader(whole))
	require.NoError(t, err)
	assert.Equal(t, []k6Order{{ID: "42", User: 5, Voucher: 7, Scenario: "storm"}}, got)
}
