package pitfall

import (
	"fmt"
	"strings"
)

// Kind says what an Event records.
type Kind int

// The kinds of event in a timeline.
const (
	KindCommand Kind = iota // a command an actor sent to Redis, with the reply
	KindOp                  // an operation on another participant (database, storage, in-process lock)
	KindEnter               // the actor enters the critical section
	KindExit                // the actor leaves it
	KindCrash               // the actor's process dies
	KindNote                // something the actor concluded or did locally
	KindTime                // the script moves time or the world (a lease runs out, a server dies)
)

// Event is one line of a timeline. T is logical time: the event's position in the run, so
// that timelines are identical from run to run.
type Event struct {
	T       int
	Actor   string // "" for scene-level events
	Kind    Kind
	To      string // the participant addressed: "Redis", "DB", "Storage", …
	What    string
	Reply   string
	Note    string // what the reply means: "acquired", "deleted B's lock", …
	Refused bool   // a lock request that was turned down
}

// Overlap is a stretch of the timeline during which two actors were both inside the
// critical section.
type Overlap struct {
	First, Second string // First entered before Second
	From, To      int    // from Second's entry to the first exit of either (or the run's end)
}

func (o Overlap) String() string {
	return fmt.Sprintf("%s and %s both inside the critical section from t=%d to t=%d", o.First, o.Second, o.From, o.To)
}

// overlaps returns every pair of actors found inside the critical section at once.
func overlaps(events []Event) []Overlap {
	inside := map[string]int{} // actor → t of entry
	var order []string         // actors inside, by entry
	var open []Overlap
	var done []Overlap
	last := 0
	leave := func(actor string, t int) {
		if _, ok := inside[actor]; !ok {
			return
		}
		delete(inside, actor)
		for i, n := range order {
			if n == actor {
				order = append(order[:i], order[i+1:]...)
				break
			}
		}
		kept := open[:0]
		for _, o := range open {
			if o.First == actor || o.Second == actor {
				o.To = t
				done = append(done, o)
			} else {
				kept = append(kept, o)
			}
		}
		open = kept
	}
	for _, e := range events {
		last = e.T
		switch e.Kind {
		case KindEnter:
			for _, other := range order {
				open = append(open, Overlap{First: other, Second: e.Actor, From: e.T})
			}
			inside[e.Actor] = e.T
			order = append(order, e.Actor)
		case KindExit, KindCrash:
			leave(e.Actor, e.T)
		}
	}
	for _, o := range open {
		o.To = last
		done = append(done, o)
	}
	return done
}

// insideAt returns the actors inside the critical section just before event t.
func insideAt(events []Event, t int) []string {
	var in []string
	for _, e := range events {
		if e.T >= t {
			break
		}
		switch e.Kind {
		case KindEnter:
			in = append(in, e.Actor)
		case KindExit, KindCrash:
			for i, n := range in {
				if n == e.Actor {
					in = append(in[:i], in[i+1:]...)
					break
				}
			}
		}
	}
	return in
}

// refusedWhileFree returns the lock refusals that happened while nobody was inside the
// critical section: a lock that excludes no one but still turns clients away.
func refusedWhileFree(events []Event) []Event {
	var out []Event
	for _, e := range events {
		if e.Refused && len(insideAt(events, e.T)) == 0 {
			out = append(out, e)
		}
	}
	return out
}

// firstEvent returns the first event matching match, and false if there is none.
func firstEvent(events []Event, match func(Event) bool) (Event, bool) {
	for _, e := range events {
		if match(e) {
			return e, true
		}
	}
	return Event{}, false
}

// noteContains matches events whose note contains s.
func noteContains(s string) func(Event) bool {
	return func(e Event) bool { return strings.Contains(e.Note, s) }
}

// joinOverlaps describes overlaps as one sentence.
func joinOverlaps(os []Overlap) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; ")
}
