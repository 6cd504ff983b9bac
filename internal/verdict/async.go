package verdict

import "fmt"

// AsyncVoucher is one voucher's books in the asynchronous mode, read after the writers drained.
type AsyncVoucher struct {
	Scenario     string
	ID           int64
	Initial      int64 // the stock the client created the voucher with
	RedisStock   int64 // units Redis may still admit
	Pending      int64 // orders in the stream that are not rows yet
	Orders       int64 // rows in voucher_orders
	DeadLettered int64 // entries of the voucher's dead-letter stream
}

// AsyncFacts is what the asynchronous mode adds to Facts: the books and the dead letters of
// every voucher, what GET /api/orders/{id} answered for the accepted orders, and the claims of
// a run in which an instance was killed.
type AsyncFacts struct {
	Vouchers []AsyncVoucher
	// DeadLetteredMetric is the dead-lettered counter summed over the instances read.
	DeadLetteredMetric float64
	// Polled is how many accepted orders were asked for with GET /api/orders/{id}; -1: not asked.
	Polled int
	// NotCreated is how many of those were not answered 200 created with their user and voucher.
	NotCreated int
	// ExpectClaimed: an instance was killed holding orders; the others must have claimed them.
	ExpectClaimed bool
	// Held is how many delivered, unacknowledged orders the killed instance held when it died.
	Held float64
	// Claimed is the claimed counter summed over the surviving instances.
	Claimed float64
}

// EvaluateAsync turns the asynchronous mode's facts into integrity checks: they hold in every
// correct run, whatever the load and whichever instance died.
func EvaluateAsync(f AsyncFacts) []Check {
	var cs []Check
	add := func(name, want, got string, ok bool) {
		cs = append(cs, Check{Name: name, Want: want, Got: got, OK: ok, Kind: Integrity})
	}
	for _, v := range f.Vouchers {
		p := fmt.Sprintf("%s voucher %d: ", v.Scenario, v.ID)
		add(p+"orders left in the stream", "0", itoa(v.Pending), v.Pending == 0)
		add(p+"redis stock + pending + orders = initial stock", itoa(v.Initial), itoa(v.RedisStock+v.Pending+v.Orders),
			v.RedisStock+v.Pending+v.Orders == v.Initial)
		add(p+"dead-lettered (stream length)", "0", itoa(v.DeadLettered), v.DeadLettered == 0)
	}
	add("dead-lettered (metric, instances read)", "0", FormatFloat(f.DeadLetteredMetric), f.DeadLetteredMetric == 0)
	if f.Polled >= 0 {
		add(fmt.Sprintf("accepted orders not 'created' on GET /api/orders/{id} (of %d)", f.Polled), "0",
			fmt.Sprint(f.NotCreated), f.NotCreated == 0)
	}
	if f.ExpectClaimed {
		// At least what the victim held, and it must have held some: a survivor also claims
		// its own entries once they idle, so "claimed > 0" could pass on a kill that held
		// nothing, the claim of the victim's orders untested.
		add(fmt.Sprintf("orders claimed from the killed instance, which held %s (metric, survivors)", FormatFloat(f.Held)),
			">= held > 0", FormatFloat(f.Claimed), f.Held > 0 && f.Claimed >= f.Held)
	}
	return cs
}
