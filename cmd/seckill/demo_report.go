package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/database"
)

type voucherRequest struct {
	Title     string    `json:"title"`
	Stock     int       `json:"stock"`
	BeginTime time.Time `json:"beginTime"`
	EndTime   time.Time `json:"endTime"`
}

// createVoucher creates a voucher through the admin API and returns its id.
func createVoucher(ctx context.Context, client *http.Client, base, token string, v voucherRequest) (int64, error) {
	body, _ := json.Marshal(v)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/vouchers", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		ID int64 `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("create voucher: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	return out.ID, nil
}

// placeOrder posts one order and returns "created" or the answer's error code.
func placeOrder(ctx context.Context, client *http.Client, base string, voucherID, userID int64) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/vouchers/"+strconv.FormatInt(voucherID, 10)+"/orders", nil)
	if err != nil {
		return "client_error"
	}
	req.Header.Set("X-User-ID", strconv.FormatInt(userID, 10))
	resp, err := client.Do(req)
	if err != nil {
		return "transport_error"
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		_, _ = io.Copy(io.Discard, resp.Body)
		return "created"
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error.Code == "" {
		return "http_" + strconv.Itoa(resp.StatusCode)
	}
	return e.Error.Code
}

// counterValue sums the counter name (with label=value, if label is set) in g. A failed
// gather is an error, never a number: a made-up count could hide duplicates from the verdict.
func counterValue(g prometheus.Gatherer, name, label, value string) (int, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m.GetLabel(), label, value) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return int(total), nil
}

func hasLabel[L interface {
	GetName() string
	GetValue() string
}](labels []L, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// demoResult is one guard's row of the table.
type demoResult struct {
	guard        string
	safe         bool
	attempts     int
	initialStock int
	codes        map[string]int
	dupBlocked   int // duplicate_blocked_by_db over both instances
	lockLost     int
	orders       int // rows in voucher_orders for the voucher
	dupRows      int // (user_id, voucher_id) pairs with more than one row
	stockLeft    int
}

func (r *demoResult) readDB(ctx context.Context, db *database.DB, voucherID int64) error {
	var orders, dupRows int64
	var stock int
	g := db.WithContext(ctx)
	if err := g.Table("voucher_orders").Where("voucher_id = ?", voucherID).Count(&orders).Error; err != nil {
		return err
	}
	if err := g.Raw(`SELECT COUNT(*) FROM (SELECT user_id FROM voucher_orders WHERE voucher_id = ?
		GROUP BY user_id HAVING COUNT(*) > 1) d`, voucherID).Scan(&dupRows).Error; err != nil {
		return err
	}
	if err := g.Raw("SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", voucherID).Scan(&stock).Error; err != nil {
		return err
	}
	r.orders, r.dupRows, r.stockLeft = int(orders), int(dupRows), stock
	return nil
}

// oversell is how far the orders went past the stock, or the stock below zero.
func (r demoResult) oversell() int {
	return max(r.orders-r.initialStock, -r.stockLeft, 0)
}

// broken reports whether anything got past the guard.
func (r demoResult) broken() bool {
	return r.dupBlocked > 0 || r.dupRows > 0 || r.oversell() > 0 || r.initialStock-r.stockLeft != r.orders
}

// ok: a safe guard must hold; an unsafe one must visibly fail, or the demo proves nothing.
func (r demoResult) ok() bool {
	if r.safe {
		return !r.broken() && r.lockLost == 0 && r.codes["created"] == r.orders
	}
	return r.broken()
}

func (r demoResult) verdict() string {
	switch {
	case r.safe && r.ok():
		return "PASS: one order per user, no oversell"
	case r.safe:
		return "FAIL: the guard let duplicates or oversell through"
	case r.ok():
		return "FAILS AS EXPECTED: duplicates reached the database"
	default:
		return "NOT SHOWN: the unsafe guard went unnoticed (raise -delay)"
	}
}

func printDemo(w io.Writer, rows []demoResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "guard\tattempts\tcreated\tdup rows\tdup blocked by DB\tin progress\talready ordered\tsold out\tother\toversell\tstock left\t")
	for _, r := range rows {
		other := r.attempts - r.codes["created"] - r.codes["order_in_progress"] - r.codes["already_ordered"] - r.codes["sold_out"]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.guard, r.attempts, r.codes["created"], r.dupRows,
			r.dupBlocked, r.codes["order_in_progress"], r.codes["already_ordered"], r.codes["sold_out"], other, r.oversell(), r.stockLeft)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%-12s %s\n", r.guard, r.verdict())
	}
}
