package pitfall

import (
	"strconv"
	"time"
)

// clock is a client's own clock: the server's time plus the client's skew. Pitfalls 4 and
// 10 inject one per client.
type clock struct {
	s    *Scene
	skew time.Duration
}

// now reads the client's clock.
func (c clock) now() (time.Time, error) {
	t, err := c.s.Now()
	return t.Add(c.skew), err
}

// startClock fixes T0, the server time the timeline's clock readings are shown against.
func (s *Scene) startClock() error {
	t, err := s.Now()
	s.t0 = t
	return err
}

// stamp returns t in Unix milliseconds, as a lock value or PXAT argument, and makes the
// timeline show it as T0±offset.
func (s *Scene) stamp(t time.Time) int64 {
	ms := t.UnixMilli()
	d := t.Sub(s.t0).Round(time.Millisecond)
	shown := "T0+" + d.String()
	if d < 0 {
		shown = "T0-" + (-d).String()
	}
	s.Alias(strconv.FormatInt(ms, 10), shown)
	return ms
}
