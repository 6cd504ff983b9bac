package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// k6Voucher is a voucher that the k6 script's setup() created, with the stock it asked for:
// the initial stock the verifier trusts (the database only knows the stock left).
type k6Voucher struct {
	Scenario string `json:"scenario"`
	ID       int64  `json:"id"`
	Stock    int64  `json:"stock"`
	// SellsOut says the scenario sends more buyers than stock and must sell out (setup()
	// records it beside the stock).
	SellsOut bool `json:"sellsOut,omitempty"`
	// SoldOut is the sold_out answers of the voucher's scenario (readSummary fills it in from
	// the summary's scenarios; not part of the voucher's JSON).
	SoldOut int64 `json:"-"`
}

// k6Summary is the part of the JSON that loadtest/k6/seckill.js's handleSummary writes that
// the verifier reads.
type k6Summary struct {
	Lock     string      `json:"lock"`
	Mode     string      `json:"mode"` // SECKILL_ORDER_MODE of the run: sync (also when empty) or async
	Vouchers []k6Voucher `json:"vouchers"`
	// Scenarios holds each scenario's answers by result (the script's RESULTS).
	Scenarios map[string]struct {
		Results map[string]int64 `json:"results"`
	} `json:"scenarios"`
}

// k6Order is one order that k6 saw answered 201.
type k6Order struct {
	ID       string `json:"id"`
	User     int64  `json:"user"`
	Voucher  int64  `json:"voucher"`
	Scenario string `json:"scenario"`
}

func readSummary(path string) (k6Summary, error) {
	var s k6Summary
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read k6 summary: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read k6 summary %s: %w", path, err)
	}
	if len(s.Vouchers) == 0 {
		return s, fmt.Errorf("read k6 summary %s: no vouchers (did setup() fail?)", path)
	}
	for _, v := range s.Vouchers {
		if v.ID <= 0 || v.Stock <= 0 || v.Scenario == "" {
			return s, fmt.Errorf("read k6 summary %s: bad voucher %+v", path, v)
		}
	}
	for i, v := range s.Vouchers {
		s.Vouchers[i].SoldOut = s.Scenarios[v.Scenario].Results["sold_out"]
	}
	return s, nil
}

// k6Record is one line of k6's console output (run with --log-format=json) as the script
// writes them: an order answered, or a voucher setup() created.
type k6Record struct {
	Order   *k6Order   `json:"order"`
	Voucher *k6Voucher `json:"voucher"`
}

// readK6Record parses one line of k6's console output: a log record whose msg is the
// script's JSON line, or that line bare. A record of something else is a zero k6Record.
func readK6Record(line string) (k6Record, error) {
	var rec struct {
		Msg string `json:"msg"`
		k6Record
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		return k6Record{}, err
	}
	if rec.Order == nil && rec.Voucher == nil && strings.HasPrefix(rec.Msg, "{") {
		// The log record wraps the script's JSON in msg.
		if err := json.Unmarshal([]byte(rec.Msg), &rec.k6Record); err != nil {
			return k6Record{}, fmt.Errorf("msg: %w", err)
		}
	}
	return rec.k6Record, nil
}

// readOrders parses k6's console output (run with --log-format=json): one log record per
// line whose msg is the script's {"order": {...}} line. Other records are skipped; a line
// that is not JSON at all is an error, because a truncated file would hide orders.
func readOrders(r io.Reader) ([]k6Order, error) {
	var orders []k6Order
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		rec, err := readK6Record(line)
		if err != nil {
			return nil, fmt.Errorf("orders line %d: %w", n, err)
		}
		if rec.Order == nil {
			continue
		}
		o := *rec.Order
		if _, err := strconv.ParseUint(o.ID, 10, 64); err != nil || o.User <= 0 || o.Voucher <= 0 {
			return nil, fmt.Errorf("orders line %d: bad order %+v", n, o)
		}
		orders = append(orders, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	return orders, nil
}

// readCreatedVouchers returns the ids of the vouchers that k6's console output records as
// created (the script's setup() writes {"voucher": {...}} as it creates each, so the record
// is there however k6 ended). A line that does not parse is skipped, not an error: a k6
// killed mid-write leaves its last line torn, and the vouchers are recorded first.
func readCreatedVouchers(path string) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read created vouchers: %w", err)
	}
	defer f.Close()
	var ids []int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		rec, err := readK6Record(strings.TrimSpace(sc.Text()))
		if err == nil && rec.Voucher != nil && rec.Voucher.ID > 0 {
			ids = append(ids, rec.Voucher.ID)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read created vouchers: %w", err)
	}
	return ids, nil
}

func readOrdersFile(path string) ([]k6Order, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	defer f.Close()
	return readOrders(f)
}
