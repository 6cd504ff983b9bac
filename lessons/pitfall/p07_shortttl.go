package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 7 — a lease shorter than the work (带有识别客户端和超时时间的锁, 标注1): the lock expires
// while its holder is still in the critical section, and two clients are inside. The
// owner-checked release (pitfall 5's fix) keeps A from deleting B's lock but cannot undo A's
// write. The remedies: renewal before expiry (续租, Redisson's watchdog) and Kleppmann's
// fencing token on the storage side. Spring's RedisLockRegistry unlock detects the loss ("The
// integrity of data protected by this lock may have been compromised") but only afterwards.
var shortTTL = &Pitfall{
	Num: "7", Name: "short-ttl", Title: "A TTL shorter than the critical section",
	Source: "002 带有识别客户端和超时时间的锁 (标注1, 续租); 000 unlock (lock lost to expiry); 001 watchdog",
	Story: "A takes the lock, reads the counter (0) and stalls inside the critical section longer than its lease " +
		"(a GC pause, a slow call). The lease runs out; B takes the lock, reads 0, writes 1. A wakes and writes 1 " +
		"over it: one increment is lost. A's owner-checked unlock then reports the lock was not held, which " +
		"tells A something went wrong but repairs nothing.",
	Remedy: "Two remedies, each run on the same script. **Renewal**: lock.ReentrantLock's watchdog (Redisson's) " +
		"resets the lease (scripts/lua/renew.lua, compare-and-PEXPIRE) every third of it while A holds the lock, so " +
		"the lease never runs out under a live holder and B waits. The script steps the watchdog through " +
		"lock.Options.Renewed, which the watchdog calls after each renewal and waits for. " +
		"**Fencing**: every acquisition draws an increasing token (lock.SimpleRedisLock's `Token`: an `INCR` in the " +
		"same MULTI/EXEC as the SET, so a later grant always gets a larger token; an INCR sent after the SET could " +
		"reach Redis after a later holder's), and the storage rejects a write whose " +
		"token is lower than one it has already accepted: A's late write (token 1, after B's 2) is refused. Renewal " +
		"cannot help a holder that stalls so long its watchdog stalls too; fencing still can.",
	Variants: []Variant{
		{Name: "wrong", Label: "lock.SimpleRedisLock, lease shorter than the work", Wrong: true},
		{Name: "renewal", Label: "lock.ReentrantLock, held by its watchdog (renew.lua)"},
		{Name: "fencing", Label: "lock.SimpleRedisLock's fencing token (Token), checked by the storage"},
	},
	play:  playShortTTL,
	judge: shortTTLVerdict,
}

func playShortTTL(s *Scene, v Variant) error {
	s.storage = &Storage{}
	lease := s.srv.renewedLease()
	name := s.LockName("counter")
	key := lockKey(name)
	var dog *watchdog
	if v.Name == "renewal" {
		dog = newWatchdog(s, "A.watchdog")
		defer dog.release()
	}
	increment := func(ctx context.Context, a *Actor, lk lock.Lock) error {
		a.Enter()
		n := s.storage.Read(a)
		a.Point("working")
		var fence int64
		if f, ok := lk.(lock.Fenced); ok && v.Name == "fencing" {
			fence = f.Token()
		}
		s.storage.Write(a, fence, n+1)
		a.Exit()
		if err := lk.Unlock(ctx); errors.Is(err, lock.ErrNotHeld) {
			a.Note("Unlock: not held any more — the lease ran out while %s worked; the data may be compromised", a.Name)
		} else if err != nil {
			return err
		}
		return nil
	}
	s.Go("A", func(ctx context.Context, a *Actor) error {
		var lk lock.Lock = lock.NewSimpleRedisLock(a.Redis, a.Process, name)
		if dog != nil {
			// TryLock holds a ReentrantLock with the watchdog: lease is the lease it renews.
			rl := dog.client(a).ReentrantLock(name)
			lk, key = rl, rl.Key()
		}
		if ok, err := lk.TryLock(ctx, lease); err != nil || !ok {
			return fmt.Errorf("A could not lock: %v", err)
		}
		return increment(ctx, a, lk)
	}, withBackground("A.watchdog"))
	s.Go("B", func(ctx context.Context, a *Actor) error {
		var lk lock.Lock = lock.NewSimpleRedisLock(a.Redis, a.Process, name)
		if dog != nil {
			lk = fixedLease{dog.client(a).ReentrantLock(name)}
		}
		// B retries once, after A has released: a lock that refuses it again would refuse it
		// forever, so B gives up and the verdict reports it was never let in.
		for tries := 0; ; tries++ {
			ok, err := lk.TryLock(ctx, s.Lease())
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if tries > 0 {
				a.Note("refused again after A released: gives up")
				return nil
			}
			a.Point("refused")
			a.Note("retries")
		}
		return increment(ctx, a, lk)
	})
	s.Until("A", "working")
	// The watchdog renews a third of a lease after the grant, then every third of a lease
	// after the last renewal: the clock moves a third of a lease between renewals, past the
	// grant's lease in all.
	for i := 0; i < 3; i++ {
		if dog != nil {
			if err := dog.next(); err != nil {
				return err
			}
		}
		if err := s.Advance(lease/3, "A is still working"); err != nil {
			return err
		}
	}
	if dog != nil {
		// The fourth renewal is held in the hook until A has released: the watchdog then ends
		// without another.
		if err := dog.next(); err != nil {
			return err
		}
	}
	if err := s.Observe(key, "A's original lease is over"); err != nil {
		return err
	}
	s.Until("B", "refused")
	s.Finish("A")
	if dog != nil && !dog.stopped {
		dog.release()
		s.record(Event{Actor: dog.name, Kind: KindNote, What: "stops: A has released the lock"})
	}
	s.Finish("B")
	return nil
}

// shortTTLVerdict judges pitfall 7: an increment lost is the failure. A fix must also make
// the progress its script promises, A then B inside with B's write accepted: with nobody let
// in, counter 0 after 0 accepted increments loses nothing either.
func shortTTLVerdict(s *Scene, events []Event, v Variant) Verdict {
	value, accepted := s.storage.Counts()
	counts := fmt.Sprintf("counter=%d after %d accepted increment%s", value, accepted, plural(accepted))
	os := overlaps(events)
	if value != accepted {
		return Verdict{Violated: true, Outcome: joinOverlaps(os) + "; lost update: " + counts}
	}
	if short := counterShortfall(events, "B", "A", "B"); short != "" && !v.Wrong {
		return Verdict{Violated: true, Outcome: "no lost update, but " + short + refusalSuffix(events) + "; " + counts}
	}
	if len(os) > 0 {
		rej, _ := firstEvent(events, func(e Event) bool { return e.Reply == "rejected" })
		return Verdict{Outcome: fmt.Sprintf("%s, but the storage rejected %s's stale write at t=%d (%s): %s",
			joinOverlaps(os), rej.Actor, rej.T, strings.TrimSpace(rej.Note), counts)}
	}
	return Verdict{Outcome: "never two inside the critical section" + refusalSuffix(events) + "; " + counts}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
