package verdict

// Answered is an order that the client saw answered 201.
type Answered struct {
	ID      string // decimal: order ids exceed 2^53
	User    int64
	Voucher int64
}

// Owner is whom a voucher_orders row belongs to.
type Owner struct{ User, Voucher int64 }

// Compare checks every answered order against the rows of the run's vouchers (inDB, keyed by
// decimal order id), counts the rows that no client saw answered, and the answered orders of
// each voucher in f.Vouchers.
func Compare(answered []Answered, inDB map[string]Owner, f *Facts) {
	perUser := map[Owner]int{}
	perVoucher := map[int64]int64{}
	logged := make(map[string]bool, len(answered))
	f.Orders201 = len(answered)
	for _, o := range answered {
		perUser[Owner{o.User, o.Voucher}]++
		perVoucher[o.Voucher]++
		logged[o.ID] = true
		row, ok := inDB[o.ID]
		switch {
		case !ok:
			f.Missing201++
		case row.User != o.User || row.Voucher != o.Voucher:
			f.WrongOwner201++
		}
	}
	for _, n := range perUser {
		if n > 1 {
			f.Repeated201++
		}
	}
	for id := range inDB {
		if !logged[id] {
			f.Unanswered++
		}
	}
	for i := range f.Vouchers {
		f.Vouchers[i].Answered = perVoucher[f.Vouchers[i].ID]
	}
}
