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
// decimal order id), and counts the rows that no client saw answered.
func Compare(answered []Answered, inDB map[string]Owner, f *Facts) {
	perUser := map[Owner]int{}
	logged := make(map[string]bool, len(answered))
	f.Orders201 = len(answered)
	for _, o := range answered {
		perUser[Owner{o.User, o.Voucher}]++
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
}
