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

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/verdict"
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

// placeOrder posts one order and returns "created" and the order's id (201, or 202 pending in
// the asynchronous mode: the demo waits for the writers before it judges), or the answer's
// error code.
func placeOrder(ctx context.Context, client *http.Client, base string, voucherID, userID int64) (code, orderID string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/vouchers/"+strconv.FormatInt(voucherID, 10)+"/orders", nil)
	if err != nil {
		return "client_error", ""
	}
	req.Header.Set(api.HeaderUserID, strconv.FormatInt(userID, 10))
	resp, err := client.Do(req)
	if err != nil {
		return "transport_error", ""
	}
	defer resp.Body.Close()
	var body struct {
		OrderID string `json:"orderId"`
		Error   struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	decoded := json.NewDecoder(resp.Body).Decode(&body) == nil
	switch {
	case (resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusAccepted) && decoded && body.OrderID != "":
		return "created", body.OrderID
	case resp.StatusCode == http.StatusCreated:
		return "created_without_id", ""
	case !decoded || body.Error.Code == "":
		return "http_" + strconv.Itoa(resp.StatusCode), ""
	}
	return body.Error.Code, ""
}

// demoResult is one guard's row of the table.
type demoResult struct {
	guard    string
	safe     bool
	attempts int
	codes    map[string]int
	facts    verdict.Facts
	checks   []verdict.Check
}

// ok: a safe guard must hold; an unsafe one must visibly fail, or the demo proves nothing.
func (r demoResult) ok() bool {
	ok, _ := verdict.Judge(r.checks, !r.safe)
	return ok
}

func (r demoResult) verdict() string {
	ok, msg := verdict.Judge(r.checks, !r.safe)
	switch {
	case len(verdict.Failed(r.checks, verdict.Integrity)) > 0:
		return msg
	case r.safe && ok:
		return "PASS: one order per user, no oversell"
	case r.safe:
		return "FAIL: the guard let duplicates or oversell through"
	case ok:
		return "FAILS AS EXPECTED: duplicates reached the database"
	default:
		return "NOT SHOWN: the unsafe guard went unnoticed (raise -delay)"
	}
}

func printDemo(w io.Writer, rows []demoResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "guard\tattempts\tcreated\tdup rows\tdup blocked by DB\tin progress\talready ordered\tsold out\tother\toversell\tstock left\t")
	for _, r := range rows {
		v := r.facts.Vouchers[0]
		other := r.attempts - r.codes["created"] - r.codes["order_in_progress"] - r.codes["already_ordered"] - r.codes["sold_out"]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.guard, r.attempts, r.codes["created"], r.facts.DuplicateGroups,
			verdict.FormatFloat(r.facts.Counts.Orders[order.ResultDuplicateByDB]), r.codes["order_in_progress"], r.codes["already_ordered"],
			r.codes["sold_out"], other, v.Oversold(), v.StockLeft)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%-12s %s\n", r.guard, r.verdict())
	}
}
