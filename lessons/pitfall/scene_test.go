package pitfall

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPitfallRunnerOverlaps(t *testing.T) {
	ev := func(actor string, k Kind) Event { return Event{Actor: actor, Kind: k} }
	tests := []struct {
		name   string
		events []Event
		want   []Overlap
	}{
		{"none", []Event{ev("A", KindEnter), ev("A", KindExit), ev("B", KindEnter), ev("B", KindExit)}, nil},
		{"two", []Event{ev("A", KindEnter), ev("B", KindEnter), ev("A", KindExit), ev("B", KindExit)},
			[]Overlap{{First: "A", Second: "B", From: 2, To: 3}}},
		{"crash ends it", []Event{ev("A", KindEnter), ev("B", KindEnter), ev("A", KindCrash)},
			[]Overlap{{First: "A", Second: "B", From: 2, To: 3}}},
		{"to the end", []Event{ev("A", KindEnter), ev("B", KindEnter), ev("", KindTime)},
			[]Overlap{{First: "A", Second: "B", From: 2, To: 3}}},
		{"three", []Event{ev("A", KindEnter), ev("B", KindEnter), ev("C", KindEnter), ev("C", KindExit)},
			[]Overlap{{First: "A", Second: "C", From: 3, To: 4}, {First: "B", Second: "C", From: 3, To: 4}, {First: "A", Second: "B", From: 2, To: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.events {
				tt.events[i].T = i + 1
			}
			assert.Equal(t, tt.want, overlaps(tt.events))
		})
	}
}

func TestPitfallRunnerRefusedWhileFree(t *testing.T) {
	events := []Event{
		{T: 1, Actor: "A", Kind: KindEnter},
		{T: 2, Actor: "B", Refused: true},
		{T: 3, Actor: "A", Kind: KindExit},
		{T: 4, Actor: "C", Refused: true},
	}
	got := refusedWhileFree(events)
	require.Len(t, got, 1)
	assert.Equal(t, "C", got[0].Actor)
}

// TestPitfallRunnerInterleaving checks the scheduler: actors run only when resumed, stop
// at the named point, and a crashed actor runs nothing more.
func TestPitfallRunnerInterleaving(t *testing.T) {
	srv, err := embeddedServer()
	require.NoError(t, err)
	defer srv.close()
	s := newScene(context.Background(), srv, "")
	body := func(ctx context.Context, a *Actor) error {
		a.Note("one")
		a.Point("p")
		a.Note("two")
		a.Point("q")
		a.Note("three")
		return nil
	}
	s.Go("A", body)
	s.Go("B", body)
	assert.True(t, s.Until("A", "p"))
	assert.True(t, s.Until("B", "q"))
	assert.True(t, s.Until("A", "q"))
	s.Crash("A")
	s.Finish("B")
	assert.False(t, s.Until("B", "p"), "a finished actor reaches no point")
	require.NoError(t, s.close())
	var got []string
	for _, e := range s.timeline() {
		got = append(got, e.Actor+":"+e.What)
	}
	assert.Equal(t, []string{
		"A:one", "B:one", "B:two", "A:two",
		"A:crashes: the process dies and never unlocks", "B:three",
	}, got)
}
