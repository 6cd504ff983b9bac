package lock

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber multiplexes every waiter of one Client over one pub/sub connection.
//
// A lock's channel is subscribed while at least one local goroutine waits on it and
// unsubscribed when the last one leaves, so the connection carries only the channels of
// locks this process is waiting for. A release message wakes one waiter of the channel (the
// oldest not yet woken): every process that waits gets one message per release and lets one
// goroutine try, instead of a thundering herd. A message naming an owner (a FairLock
// handover) wakes that owner's waiter, if it is in this process. A release in this process
// wakes its waiter directly (wakeLocal) and the process ignores its own message.
type subscriber struct {
	ps      *redis.PubSub
	stats   *stats
	process string // a release published by this process was already served locally

	mu     sync.Mutex
	chans  map[string]*channelState
	closed bool
	done   chan struct{} // closed when the receive loop has ended

	// confirming, set by the package's tests, runs on the receive loop before it takes in
	// a subscription's confirmation: a test holds confirmations back with it.
	confirming atomic.Pointer[func(channel string)]
}

// channelState is one channel's waiters and subscription progress.
type channelState struct {
	waiters []*waiter
	// sent counts SUBSCRIBE commands sent for the channel, confirmed the confirmations read
	// back. A waiter may rely on messages only once confirmed catches up with sent.
	sent, confirmed uint64
	ready           chan struct{} // closed when confirmed reaches sent
}

// waiter is one goroutine waiting on a channel.
type waiter struct {
	channel string
	owner   string      // the wait (owner and ticket) a handover message must name to wake this waiter
	wake    chan wakeup // capacity 1: a pending wake-up
}

// wakeup is why a waiter was woken: a release (or handover, payload naming the owner) that
// came as a message or from a releaser in this process, or a reconnect of the subscription.
type wakeup struct {
	payload string
	source  wakeSource
	// released is when a releaser of this process sent its release (byLocal only): a lease
	// the release set for a handover runs from then or later. A message carries no such
	// time: the waiter cannot tell how long it was on its way.
	released time.Time
}

type wakeSource uint8

const (
	byMessage   wakeSource = iota // a message on the subscription
	byLocal                       // a releaser of this process, directly
	byReconnect                   // the subscription reconnected: messages may have been lost
)

// errSubscriberClosed is what a waiter sees when the Client is closed under it.
var errSubscriberClosed = ErrClosed

func newSubscriber(rdb redis.UniversalClient, st *stats, process string) *subscriber {
	s := &subscriber{
		ps:      rdb.Subscribe(context.Background()),
		stats:   st,
		process: process,
		chans:   make(map[string]*channelState),
		done:    make(chan struct{}),
	}
	go s.receive()
	return s
}

// register adds a waiter on channel, subscribing when it is the channel's first, and returns
// at once with a channel that is closed once the subscription is confirmed: any release
// published after that is delivered. Until then the waiter already gets what a releaser of
// this process hands it (wakeLocal), so a handover need not wait for a SUBSCRIBE's round trip
// (and the connection's dial, the first time), which on a loaded machine is what made the
// first waits of a FairLock's queue the longest.
func (s *subscriber) register(ctx context.Context, channel, owner string) (*waiter, <-chan struct{}, error) {
	w := &waiter{channel: channel, owner: owner, wake: make(chan wakeup, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errSubscriberClosed
	}
	st := s.chans[channel]
	if st == nil {
		st = &channelState{}
		s.chans[channel] = st
	}
	st.waiters = append(st.waiters, w)
	if len(st.waiters) == 1 {
		// The first waiter subscribes. The command is written while s.mu is held so that
		// SUBSCRIBE and UNSUBSCRIBE reach the server in the order they were decided.
		st.sent++
		st.ready = make(chan struct{})
		s.stats.subscribes.Add(1)
		if err := s.ps.Subscribe(ctx, channel); err != nil {
			st.sent-- // no confirmation will come for it (a reconnect's is clamped)
			s.removeLocked(w)
			s.mu.Unlock()
			return nil, nil, err
		}
	}
	ready := st.ready
	s.mu.Unlock()
	return w, ready, nil
}

// registerHot adds a waiter on channel without a round trip when the channel is already
// subscribed and confirmed (other local goroutines wait on it), else returns nil. A caller
// that registers before its first attempt needs no second attempt after a failure: any
// release after the first attempt reaches it.
func (s *subscriber) registerHot(channel, owner string) *waiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if s.closed || st == nil || len(st.waiters) == 0 || st.confirmed < st.sent {
		return nil
	}
	w := &waiter{channel: channel, owner: owner, wake: make(chan wakeup, 1)}
	st.waiters = append(st.waiters, w)
	return w
}

// unregister removes w. A release wake-up w received but did not use passes to the next
// waiter, so a release is never swallowed by a goroutine that stopped waiting. (A handover
// to w is not passed on: w's lock withdraws it, see FairLock.)
func (s *subscriber) unregister(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(w)
	select {
	case u := <-w.wake:
		if st := s.chans[w.channel]; st != nil && w.owner == "" {
			st.wakeOne(u)
		}
	default:
	}
}

// requeue gives w back a wake-up it took but could not use, unless another is pending: its
// unregister then passes it on as one w never took.
func (w *waiter) requeue(u wakeup) {
	select {
	case w.wake <- u:
	default:
	}
}

func (s *subscriber) removeLocked(w *waiter) {
	st := s.chans[w.channel]
	if st == nil {
		return
	}
	for i, x := range st.waiters {
		if x == w {
			st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
			break
		}
	}
	if len(st.waiters) > 0 {
		return
	}
	if !s.closed {
		s.stats.unsubscribes.Add(1)
		// A failed UNSUBSCRIBE leaves a channel subscribed: harmless, its messages find no
		// waiter, and the connection's reconnect drops it.
		_ = s.ps.Unsubscribe(context.Background(), w.channel)
	}
	if st.confirmed >= st.sent {
		delete(s.chans, w.channel)
	}
}

// wakeOne signals the oldest waiter without a pending wake-up.
func (st *channelState) wakeOne(u wakeup) {
	for _, w := range st.waiters {
		select {
		case w.wake <- u:
			return
		default:
		}
	}
}

// receive reads the connection until close. After a connection error it wakes every waiter,
// since a release may have been published while the connection was down; go-redis
// reconnects and resubscribes on the next read.
func (s *subscriber) receive() {
	defer close(s.done)
	ctx := context.Background()
	for {
		msg, err := s.ps.ReceiveTimeout(ctx, time.Minute)
		if err != nil {
			if s.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = s.ps.Ping(ctx) // keep an idle connection honest
				continue
			}
			s.wakeAll()
			time.Sleep(50 * time.Millisecond) // do not spin while the server is away
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if h := s.confirming.Load(); h != nil {
					(*h)(m.Channel)
				}
				s.confirm(m.Channel)
			}
		case *redis.Message:
			s.deliver(m.Channel, m.Payload)
		}
	}
}

func (s *subscriber) confirm(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if st == nil {
		return
	}
	// A reconnect resubscribes on its own and adds confirmations nobody asked for.
	st.confirmed = min(st.confirmed+1, st.sent)
	if st.confirmed == st.sent {
		select {
		case <-st.ready:
		default:
			close(st.ready)
		}
		if len(st.waiters) == 0 {
			delete(s.chans, channel)
		}
	}
}

// deliver dispatches a message: "<new holder> <releasing process>", either part may be empty.
// A message from a release in this process is ignored, since the releaser has woken the
// waiter already (wakeLocal). A new holder names the FairLock wait the lock was handed to;
// without one, the message says "released" and wakes one waiter.
func (s *subscriber) deliver(channel, payload string) {
	holder, from, _ := strings.Cut(payload, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if st == nil || (from != "" && from == s.process) {
		return
	}
	st.signal(wakeup{payload: holder, source: byMessage})
}

// wakeLocal is what a message would do, done by a releaser of this process as soon as its
// release returns, a message's trip through Redis and the subscription earlier. released is
// when the release was sent.
func (s *subscriber) wakeLocal(channel, payload string, released time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.chans[channel]; st != nil {
		st.signal(wakeup{payload: payload, source: byLocal, released: released})
	}
}

// signal wakes the waiter that payload names, or one waiter when it names none of them.
func (st *channelState) signal(u wakeup) {
	if len(st.waiters) == 0 || st.waiters[0].owner == "" {
		st.wakeOne(u)
		return
	}
	wait, _ := splitHandover(u.payload)
	for _, w := range st.waiters {
		if w.owner == wait {
			select {
			case w.wake <- u:
			default:
			}
			return
		}
	}
}

// splitHandover splits a handover's payload, the wait it names and "#" and the fencing token
// of the grant (fair_unlock.lua, fair_lock.lua), into the two. A wait ends in "/" and its
// ticket's digits, so the token's "#" is the last one. token is 0 when the payload carries
// none or one that is not a positive integer: the wait still names its waiter, which then
// asks Redis for the token (a wake-up that named nobody would be lost).
func splitHandover(payload string) (wait string, token int64) {
	i := strings.LastIndexByte(payload, '#')
	if i < 0 {
		return payload, 0
	}
	t, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || t <= 0 {
		return payload[:i], 0
	}
	return payload[:i], t
}

func (s *subscriber) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.chans {
		for _, w := range st.waiters {
			select {
			case w.wake <- wakeup{source: byReconnect}:
			default:
			}
		}
	}
}

func (s *subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.ps.Close()
	<-s.done
	return err
}
