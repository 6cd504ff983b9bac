package async

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// streamID is a stream entry id, "ms-seq", in the order Redis keeps entries: by ms, then by
// seq, both unsigned 64-bit numbers. As strings "10-0" would sort before "9-0", and as a Lua
// number (a double) a seq past 2^53 loses its last digits.
type streamID struct{ ms, seq uint64 }

// parseStreamID reads an entry id; a part that is not a number reads as 0 ("9" as 9-0). ok
// reports whether the ms part was a number.
func parseStreamID(s string) (id streamID, ok bool) {
	ms, seq, _ := strings.Cut(s, "-")
	var err error
	id.ms, err = strconv.ParseUint(ms, 10, 64)
	id.seq, _ = strconv.ParseUint(seq, 10, 64)
	return id, err == nil
}

// streamIDTime is the time part of a stream entry id ("ms-seq"): when Redis added it.
func streamIDTime(s string) (time.Time, bool) {
	id, ok := parseStreamID(s)
	return time.UnixMilli(int64(id.ms)), ok && id.ms <= math.MaxInt64
}

// inStreamOrder sorts ids as the stream orders its entries, and returns them as the arguments
// of a script. Something that is not an entry id sorts first.
func inStreamOrder(ids []string) []any {
	type parsed struct {
		s  string
		id streamID
	}
	ps := make([]parsed, len(ids))
	for i, s := range ids {
		id, _ := parseStreamID(s)
		ps[i] = parsed{s, id}
	}
	slices.SortStableFunc(ps, func(a, b parsed) int {
		return cmp.Or(cmp.Compare(a.id.ms, b.id.ms), cmp.Compare(a.id.seq, b.id.seq))
	})
	out := make([]any, len(ps))
	for i, p := range ps {
		out[i] = p.s
	}
	return out
}
