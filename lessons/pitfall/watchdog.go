package pitfall

import (
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// watchdog steps the watchdogs of the lock.Clients it makes, through lock.Options.Renewed: a
// watchdog that has renewed waits in Renewed until the script lets it go on (next), so each
// renewal lands where the script puts it in the timeline. The watchdog still waits a third
// of its lease, in real time, between renewals: the script's lease is short.
type watchdog struct {
	s       *Scene
	name    string // the watchdog's name in the timeline
	heard   chan error
	proceed chan struct{}
	done    chan struct{} // closed by release: a renewal reported after it does not wait
	waiting bool          // a renewal waits in Renewed
	stopped bool          // a renewal found the lease lost: the watchdog has ended
}

// renewalWait bounds the wait for one renewal: a third of the lesson's lease, and time for
// a loaded machine.
const renewalWait = 10 * time.Second

func newWatchdog(s *Scene, name string) *watchdog {
	return &watchdog{s: s, name: name, heard: make(chan error), proceed: make(chan struct{}), done: make(chan struct{})}
}

// client returns a lock.Client of a's (one per process), stepped by w, closed at teardown:
// after the actors, once its watchdog has been released.
func (w *watchdog) client(a *Actor) *lock.Client {
	c := lock.NewClient(a.Redis, lock.Options{Process: a.Process, Renewed: w.renewed})
	w.s.mu.Lock()
	w.s.teardown = append(w.s.teardown, c.Close)
	w.s.mu.Unlock()
	return c
}

// renewed is the Clients' Renewed: it reports the renewal and waits until the script lets
// the watchdog go on, or has released it.
func (w *watchdog) renewed(key string, ok bool, err error) {
	if err == nil && !ok {
		err = errors.New("renew.lua found the lock gone")
	}
	select {
	case w.heard <- err:
	case <-w.done:
		return
	}
	select {
	case <-w.proceed:
	case <-w.done:
	}
}

// next lets a renewal that waits go on, and waits for the next one. A renewal that found
// the lease lost ends the watchdog (the library reports the hold lost): the timeline says so,
// and next returns at once from then on.
func (w *watchdog) next() error {
	if w.stopped {
		return nil
	}
	if w.waiting {
		w.proceed <- struct{}{}
		w.waiting = false
	}
	select {
	case err := <-w.heard:
		if err != nil {
			w.stopped = true
			w.s.record(Event{Actor: w.name, Kind: KindNote, What: "the lease is already lost (" + err.Error() + "): stops"})
			return nil
		}
		w.waiting = true
		return nil
	case <-w.s.ctx.Done():
		return w.s.ctx.Err()
	case <-time.After(renewalWait):
		return fmt.Errorf("%s: no renewal within %s", w.name, renewalWait)
	}
}

// release lets every watchdog go on unstepped: the script is done with them.
func (w *watchdog) release() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}
