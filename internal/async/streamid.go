package async

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// streamID is a stream entry id, "ms-seq", in the order Redis keeps entries: by ms, then by
// seq, both unsigned 64-bit numbers. As strings "10-0" would sort before "9-0", and as a Lua
// number (a double) a seq past 2^53 loses its last digits.
type streamID struct{ ms, seq uint64 }

// parseStreamID reads an entry id; a part that is not a number reads as 0 ("9" as 9-0).
func parseStreamID(s string) streamID {
	ms, seq, _ := strings.Cut(s, "-")
	var id streamID
	id.ms, _ = strconv.ParseUint(ms, 10, 64)
	id.seq, _ = strconv.ParseUint(seq, 10, 64)
	return id
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
		ps[i] = parsed{s, parseStreamID(s)}
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
