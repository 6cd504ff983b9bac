package voucher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
)

func databases(t *testing.T) map[string]*database.DB { return testenv.Databases(t, database.Pool{}) }

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestOnSale(t *testing.T) {
	v := voucher.Voucher{BeginTime: utc("2026-01-01T00:00:00Z"), EndTime: utc("2026-01-02T00:00:00Z")}
	tests := []struct {
		now  string
		want bool
	}{
		{"2025-12-31T23:59:59.999999999Z", false},
		{"2026-01-01T00:00:00Z", true}, // begin_time <= now
		{"2026-01-01T08:00:00+08:00", true},
		{"2026-01-01T23:59:59.999999999Z", true},
		{"2026-01-02T00:00:00Z", false}, // now < end_time
		{"2026-01-03T00:00:00Z", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, v.OnSale(utc(tt.now)), "OnSale(%s)", tt.now)
	}
}

// TestCreateValidation runs every validation rule, each on both sides of its limit, through
// Service.Create over a real store.
func TestCreateValidation(t *testing.T) {
	ok := voucher.Voucher{Title: "t", Stock: 1, BeginTime: utc("2026-01-01T00:00:00Z"), EndTime: utc("2026-01-02T00:00:00Z")}
	with := func(f func(*voucher.Voucher)) voucher.Voucher { v := ok; f(&v); return v }
	tests := []struct {
		name    string
		v       voucher.Voucher
		wantErr string // empty: valid
	}{
		{"valid", ok, ""},
		{"title empty", with(func(v *voucher.Voucher) { v.Title = "" }), "title is required"},
		{"title blank", with(func(v *voucher.Voucher) { v.Title = " \t\u00a0\u3000" }), "not blank"},
		{"title with NUL", with(func(v *voucher.Voucher) { v.Title = "a\x00b" }), "control characters"},
		{"subTitle with a line break", with(func(v *voucher.Voucher) { v.SubTitle = "a\nb" }), "control characters"},
		{"subTitle with a C1 control", with(func(v *voucher.Voucher) { v.SubTitle = "a\u0085b" }), "control characters"},
		{"rules with NUL", with(func(v *voucher.Voucher) { v.Rules = "line one\nline two\x00" }), "control characters but tabs and line breaks"},
		{"rules with tabs and line breaks", with(func(v *voucher.Voucher) { v.Rules = "1.\tone\r\n2.\ttwo" }), ""},
		{"title 255 characters", with(func(v *voucher.Voucher) { v.Title = strings.Repeat("秒", 255) }), ""},
		{"title 256 characters", with(func(v *voucher.Voucher) { v.Title = strings.Repeat("a", 256) }), "at most 255"},
		{"subTitle 255 characters", with(func(v *voucher.Voucher) { v.SubTitle = strings.Repeat("杀", 255) }), ""},
		{"subTitle 256 characters", with(func(v *voucher.Voucher) { v.SubTitle = strings.Repeat("a", 256) }), "at most 255"},
		{"rules 1024 characters", with(func(v *voucher.Voucher) { v.Rules = strings.Repeat("规", 1024) }), ""},
		{"rules 1025 characters", with(func(v *voucher.Voucher) { v.Rules = strings.Repeat("a", 1025) }), "at most 1024"},
		{"title not UTF-8", with(func(v *voucher.Voucher) { v.Title = "a\xffb" }), "valid UTF-8"},
		{"subTitle not UTF-8", with(func(v *voucher.Voucher) { v.SubTitle = "\xc3" }), "valid UTF-8"},
		{"rules not UTF-8", with(func(v *voucher.Voucher) { v.Rules = "\xed\xa0\x80" }), "valid UTF-8"},
		{"stock zero", with(func(v *voucher.Voucher) { v.Stock = 0 }), ""},
		{"stock negative", with(func(v *voucher.Voucher) { v.Stock = -1 }), "stock must be between"},
		{"stock at the maximum", with(func(v *voucher.Voucher) { v.Stock = voucher.MaxStock }), ""},
		{"stock over the maximum", with(func(v *voucher.Voucher) { v.Stock = voucher.MaxStock + 1 }), "stock must be between"},
		{"payValue negative", with(func(v *voucher.Voucher) { v.PayValue = -1 }), "must not be negative"},
		{"actualValue negative", with(func(v *voucher.Voucher) { v.ActualValue = -1 }), "must not be negative"},
		{"values large", with(func(v *voucher.Voucher) { v.PayValue, v.ActualValue = 1<<62, 1<<62 }), ""},
		{"beginTime missing", with(func(v *voucher.Voucher) { v.BeginTime = time.Time{} }), "required"},
		{"endTime missing", with(func(v *voucher.Voucher) { v.EndTime = time.Time{} }), "required"},
		{"begin in 1999", with(func(v *voucher.Voucher) { v.BeginTime = utc("1999-12-31T23:59:59.999Z") }), "between the years"},
		{"begin in 2000", with(func(v *voucher.Voucher) { v.BeginTime = utc("2000-01-01T00:00:00Z") }), ""},
		{"begin in 2000 locally, 1999 in UTC", with(func(v *voucher.Voucher) { v.BeginTime = utc("2000-01-01T00:30:00+01:00") }), "between the years"},
		{"end at the last millisecond of 9999", with(func(v *voucher.Voucher) { v.EndTime = utc("9999-12-31T23:59:59.999Z") }), ""},
		{"end in 9999 locally, 10000 in UTC", with(func(v *voucher.Voucher) { v.EndTime = utc("9999-12-31T23:00:00-05:00") }), "between the years"},
		{"end before begin", with(func(v *voucher.Voucher) { v.EndTime = utc("2025-12-31T00:00:00Z") }), "endTime must be after beginTime"},
		{"end equals begin", with(func(v *voucher.Voucher) { v.EndTime = v.BeginTime }), "endTime must be after beginTime"},
		{"end equals begin in another zone", with(func(v *voucher.Voucher) { v.EndTime = utc("2026-01-01T08:00:00+08:00") }), "endTime must be after beginTime"},
		{"end one millisecond after begin", with(func(v *voucher.Voucher) { v.EndTime = v.BeginTime.Add(time.Millisecond) }), ""},
		{"end after begin by less than the stored millisecond", with(func(v *voucher.Voucher) { v.EndTime = v.BeginTime.Add(999 * time.Microsecond) }), "endTime must be after beginTime"},
	}
	for name, db := range databases(t) {
		svc := voucher.NewService(voucher.NewStore(db.DB))
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				got, err := svc.Create(context.Background(), tt.v)
				if tt.wantErr != "" {
					require.ErrorIs(t, err, voucher.ErrInvalid)
					assert.Contains(t, err.Error(), tt.wantErr)
					assert.Zero(t, got)
					return
				}
				require.NoError(t, err)
				assert.Positive(t, got.ID)
				stored, err := svc.Get(context.Background(), got.ID)
				require.NoError(t, err)
				assert.Equal(t, withoutReadAt(got), withoutReadAt(stored), "Create answers what Get reads")
			})
		}
	}
}

// TestStoreRoundTrip checks that what the store writes it reads back: every field, times in
// UTC to the millisecond, ids in creation order.
func TestStoreRoundTrip(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := voucher.NewStore(db.DB)
			in := voucher.Voucher{
				Title: "满100减50 💸", SubTitle: "周一至周五", Rules: "全场通用\n不可叠加", PayValue: 5000, ActualValue: 10000, Stock: 100,
				BeginTime: time.Date(2026, 11, 22, 8, 0, 0, 123_000_000, shanghai), EndTime: time.Date(2026, 11, 23, 0, 0, 0, 999_000_000, time.UTC),
			}
			before := time.Now().UTC().Add(-time.Second)
			got, err := store.Create(ctx, in)
			require.NoError(t, err)
			require.Positive(t, got.ID)

			read, err := store.Get(ctx, got.ID)
			require.NoError(t, err)
			after := time.Now().UTC().Add(time.Second)
			// ReadAt is the database's clock at each read; the test's databases share the
			// machine's clock.
			assert.False(t, got.ReadAt.Before(before) || got.ReadAt.After(read.ReadAt) || read.ReadAt.After(after),
				"ReadAt %v then %v, not within [%v, %v] in that order", got.ReadAt, read.ReadAt, before, after)
			assert.Equal(t, time.UTC, read.ReadAt.Location())
			assert.Equal(t, withoutReadAt(got), withoutReadAt(read), "Create returns what Get reads")
			assert.Equal(t, in.Title, read.Title)
			assert.Equal(t, in.SubTitle, read.SubTitle)
			assert.Equal(t, in.Rules, read.Rules)
			assert.Equal(t, in.PayValue, read.PayValue)
			assert.Equal(t, in.ActualValue, read.ActualValue)
			assert.Equal(t, in.Stock, read.Stock)
			assert.Equal(t, utc("2026-11-22T00:00:00.123Z"), read.BeginTime, "begin in UTC, milliseconds kept")
			assert.Equal(t, utc("2026-11-23T00:00:00.999Z"), read.EndTime, "end in UTC, milliseconds kept")
			assert.Equal(t, time.UTC, read.CreatedAt.Location())
			assert.True(t, read.CreatedAt.After(before) && read.CreatedAt.Before(time.Now().Add(time.Second)),
				"created_at %v is not now", read.CreatedAt)
			assert.Equal(t, time.UTC, read.UpdatedAt.Location())

			second, err := store.Create(ctx, voucher.Voucher{Title: "second", BeginTime: in.BeginTime, EndTime: in.EndTime})
			require.NoError(t, err)
			assert.Greater(t, second.ID, got.ID, "ids grow")
			assert.Zero(t, second.Stock)

			var beginUTC time.Time
			require.NoError(t, db.Raw("SELECT begin_time FROM seckill_vouchers WHERE voucher_id = ?", got.ID).Scan(&beginUTC).Error)
			assert.True(t, beginUTC.Equal(utc("2026-11-22T00:00:00.123Z")), "begin_time column holds %v", beginUTC)
		})
	}
}

func TestStoreNotFound(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			store := voucher.NewStore(db.DB)
			for _, id := range []int64{1, 0, -1, 1 << 62} {
				_, err := store.Get(context.Background(), id)
				assert.ErrorIs(t, err, voucher.ErrNotFound, "Get(%d)", id)
			}
			// A voucher row without its seckill row is not a seckill voucher.
			require.NoError(t, db.Exec("INSERT INTO vouchers (id, title, created_at, updated_at) VALUES (77, 'plain', ?, ?)",
				time.Now().UTC(), time.Now().UTC()).Error)
			_, err := store.Get(context.Background(), 77)
			assert.ErrorIs(t, err, voucher.ErrNotFound, "voucher without a seckill row")
		})
	}
}

// TestStoreErrors checks that a failing database is an error, and not ErrNotFound.
func TestStoreErrors(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			store := voucher.NewStore(db.DB)
			svc := voucher.NewService(store)
			v, err := svc.Create(context.Background(), voucher.Voucher{Title: "t", Stock: 1,
				BeginTime: utc("2026-01-01T00:00:00Z"), EndTime: utc("2026-01-02T00:00:00Z")})
			require.NoError(t, err)
			require.NoError(t, db.Close())

			_, err = store.Get(context.Background(), v.ID)
			require.Error(t, err)
			assert.False(t, errors.Is(err, voucher.ErrNotFound), "a closed database reads as not found: %v", err)
			_, err = svc.Create(context.Background(), v)
			require.Error(t, err)
			assert.False(t, errors.Is(err, voucher.ErrInvalid), "a closed database reads as invalid input: %v", err)
		})
	}
}

// TestCreateRollsBack checks that a voucher whose seckill row cannot be written leaves no
// voucher behind: both rows are one transaction.
func TestCreateRollsBack(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, db.Exec("DROP TABLE seckill_vouchers").Error)
			_, err := voucher.NewStore(db.DB).Create(context.Background(), voucher.Voucher{Title: "t", Stock: 1,
				BeginTime: utc("2026-01-01T00:00:00Z"), EndTime: utc("2026-01-02T00:00:00Z")})
			require.Error(t, err)
			var n int64
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM vouchers").Scan(&n).Error)
			assert.Zero(t, n, "vouchers left by a failed create")
		})
	}
}

// TestStoreEndSales: EndSales ends the sales of the vouchers it is given that are on sale, and
// only those: their end becomes now, a sale that had ended keeps its end, another voucher
// stays on sale; a second call finds nothing left to end.
func TestStoreEndSales(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := voucher.NewStore(db.DB)
			now := time.Now().UTC().Truncate(time.Millisecond)
			create := func(begin, end time.Time) int64 {
				v, err := store.Create(ctx, voucher.Voucher{Title: "t", Stock: 1, BeginTime: begin, EndTime: end})
				require.NoError(t, err)
				return v.ID
			}
			a, b := create(now.Add(-time.Minute), now.Add(time.Hour)), create(now.Add(-time.Minute), now.Add(time.Hour))
			other := create(now.Add(-time.Minute), now.Add(time.Hour))
			ended := create(now.Add(-2*time.Hour), now.Add(-time.Hour))

			n, err := store.EndSales(ctx, []int64{a, b, ended}, now)
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "a and b were on sale")
			for id, want := range map[int64]time.Time{a: now, b: now, ended: now.Add(-time.Hour), other: now.Add(time.Hour)} {
				v, err := store.Get(ctx, id)
				require.NoError(t, err)
				assert.True(t, want.Equal(v.EndTime), "voucher %d: got end %v, want %v", id, v.EndTime, want)
			}
			n, err = store.EndSales(ctx, []int64{a, b}, now.Add(time.Second))
			require.NoError(t, err)
			assert.Zero(t, n, "nothing left to end")
			n, err = store.EndSales(ctx, nil, now)
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
}

// withoutReadAt is v without the clock reading of the read that returned it.
func withoutReadAt(v voucher.Voucher) voucher.Voucher {
	v.ReadAt = time.Time{}
	return v
}
