package voucher

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Service creates and reads vouchers, validating what callers ask for.
type Service struct {
	store *Store
}

// NewService returns a voucher service over store.
func NewService(store *Store) *Service { return &Service{store: store} }

// Create validates v and stores it. Invalid input returns an error wrapping ErrInvalid whose
// message says which field is wrong.
func (s *Service) Create(ctx context.Context, v Voucher) (Voucher, error) {
	// The databases keep milliseconds; truncating here keeps the answer equal to what a
	// later GET returns, and validating after it judges the window that is stored.
	v.BeginTime = v.BeginTime.UTC().Truncate(time.Millisecond)
	v.EndTime = v.EndTime.UTC().Truncate(time.Millisecond)
	if err := validate(v); err != nil {
		return Voucher{}, err
	}
	return s.store.Create(ctx, v)
}

// Get returns the voucher with id, or ErrNotFound.
func (s *Service) Get(ctx context.Context, id int64) (Voucher, error) {
	return s.store.Get(ctx, id)
}

func validate(v Voucher) error {
	switch {
	case strings.TrimSpace(v.Title) == "":
		return fmt.Errorf("%w: title is required, and not blank", ErrInvalid)
	case strings.ContainsFunc(v.Title+v.SubTitle, unicode.IsControl):
		return fmt.Errorf("%w: title and subTitle must not contain control characters", ErrInvalid)
	case strings.ContainsFunc(v.Rules, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' }):
		return fmt.Errorf("%w: rules must not contain control characters but tabs and line breaks", ErrInvalid)
	case utf8.RuneCountInString(v.Title) > MaxTitleLen || utf8.RuneCountInString(v.SubTitle) > MaxTitleLen:
		return fmt.Errorf("%w: title and subTitle are at most %d characters", ErrInvalid, MaxTitleLen)
	case utf8.RuneCountInString(v.Rules) > MaxRulesLen:
		return fmt.Errorf("%w: rules are at most %d characters", ErrInvalid, MaxRulesLen)
	case !utf8.ValidString(v.Title) || !utf8.ValidString(v.SubTitle) || !utf8.ValidString(v.Rules):
		return fmt.Errorf("%w: text must be valid UTF-8", ErrInvalid)
	case v.Stock < 0 || v.Stock > MaxStock:
		return fmt.Errorf("%w: stock must be between 0 and %d", ErrInvalid, MaxStock)
	case v.PayValue < 0 || v.ActualValue < 0:
		return fmt.Errorf("%w: payValue and actualValue must not be negative", ErrInvalid)
	case v.BeginTime.IsZero() || v.EndTime.IsZero():
		return fmt.Errorf("%w: beginTime and endTime are required", ErrInvalid)
	// The years are UTC ones (Create converts): 9999-12-31T23:00:00-05:00 is in the year
	// 10000, past what MySQL's DATETIME holds.
	case v.BeginTime.Year() < 2000 || v.EndTime.Year() > 9999:
		return fmt.Errorf("%w: times must fall between the years 2000 and 9999 UTC", ErrInvalid)
	case !v.EndTime.After(v.BeginTime):
		return fmt.Errorf("%w: endTime must be after beginTime", ErrInvalid)
	}
	return nil
}
