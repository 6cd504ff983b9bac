package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/seckill/seckill/internal/voucher"
)

// endSaleTimeout bounds ending the sale of a demo's voucher, which runs on a context of its
// own: the demo's may have ended (Ctrl-C).
const endSaleTimeout = 10 * time.Second

// testHookVoucherCreated, in tests, runs after the demo created a voucher.
var testHookVoucherCreated = func(id int64) {}

// createSale creates the voucher of one of the demo's storms or fencing trials through cl's
// admin API, on sale for an hour from now less a minute, and returns its id and end, which
// ends its sale. Call end whether the storm finished, failed or was interrupted: on a real
// database a voucher left on sale is loaded into Redis, with its users, by every asynchronous
// instance that starts on it within the hour.
func createSale(ctx context.Context, client *http.Client, cl *cluster, token, title string, stock int) (id int64, end func() error, err error) {
	now := time.Now().UTC()
	id, err = createVoucher(ctx, client, cl.url, token, voucherRequest{
		Title: title, Stock: stock, BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour),
	})
	if err != nil {
		return 0, nil, err
	}
	testHookVoucherCreated(id)
	end = func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endSaleTimeout)
		defer cancel()
		if _, err := voucher.NewStore(cl.instances[0].DB.DB).EndSales(ctx, []int64{id}, time.Now()); err != nil {
			return fmt.Errorf("end the sale of the demo's voucher %d, left on sale until %s: %w", id, now.Add(time.Hour).Format(time.RFC3339), err)
		}
		return nil
	}
	return id, end, nil
}
