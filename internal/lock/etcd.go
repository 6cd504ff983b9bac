package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Defaults of EtcdOptions.
const (
	// DefaultEtcdLeaseTTL is EtcdOptions.LeaseTTL when zero: a process that dies loses its
	// locks within it.
	DefaultEtcdLeaseTTL = 10 * time.Second
	// DefaultEtcdPrefix is EtcdOptions.Prefix when empty.
	DefaultEtcdPrefix = "/seckill/locks"
	// etcdLeasePause is the pause between attempts to grant a new lease after one was lost.
	etcdLeasePause = 500 * time.Millisecond
	// etcdCleanupTimeout bounds the background deletes and revokes that follow a failure.
	etcdCleanupTimeout = 2 * time.Second
)

// errEtcdNoLease is returned while the client has no lease to write lock keys with: etcd
// was unreachable when the last one was lost, and a new one is not granted yet.
var errEtcdNoLease = errors.New("lock: no etcd lease (etcd unreachable?)")

// EtcdOptions configures an EtcdClient. The zero value is usable.
type EtcdOptions struct {
	// Process identifies this process in the owner written into lock keys; NewProcessID()
	// when empty. Two processes must never share one.
	Process string
	// LeaseTTL is the TTL of the client's lease, to which every lock key it writes is
	// attached: the keys of a process that dies or is cut off go when it runs out. Whole
	// seconds (etcd's unit), at least 2 s; DefaultEtcdLeaseTTL when zero.
	LeaseTTL time.Duration
	// Prefix is the key prefix: lock name n queues under Prefix/n/. DefaultEtcdPrefix when
	// empty.
	Prefix string
}

// EtcdClient owns one process's etcd lease and the holds of the locks taken with it: the
// etcd recipe behind etcd's own concurrency.Mutex, with a key per owner (process and
// goroutine) under one lease instead of one lease per lock, and the lease's loss reported
// to the holders. Make one per process (or service instance) and Close it at shutdown:
// Close revokes the lease, which deletes its keys, so the locks it held pass on at once.
//
// The lease is kept alive by etcd's client, every third of its TTL. The holds are declared
// lost when etcd ends the lease (its keep-alive channel closes), when a put of an acquisition
// finds it gone, or when no renewal has been answered for two thirds of the TTL: the earliest the server may expire the lease is its
// last renewal plus the TTL, and that renewal was sent before its answer came, so the
// client's own reckoning must leave the round trip a margin (the margin go-zookeeper's pings
// leave a session). A new lease is then granted, and later acquisitions use it.
type EtcdClient struct {
	cli     *clientv3.Client
	process string
	prefix  string
	ttl     time.Duration

	holds *sessionHolds // the holds, with their keys

	mu    sync.Mutex       // guards lease, gone, settled, void, closed and cleaning, and orders a loss of holds with the lease's change
	lease clientv3.LeaseID // 0 while none
	// settled is closed once the client has a lease, or once its first grant since it lost
	// the last one has failed: a waiter whose lease was lost waits for it to learn whether
	// it queues again (see nextLease).
	settled chan struct{}
	// gone is closed when a call finds lease missing in etcd (see leaseGone): keep stops
	// following it and grants the next one.
	gone chan struct{}
	// void is the mod revision of the lease's void mark as last seen, 0 while it has none
	// (see voidKey).
	void   int64
	closed bool
	// cleaning has the keys being deleted in the background, each with a channel closed when
	// that delete is over. A key's name is its lease and owner, so the owner's next
	// acquisition would name its key the same: it waits for the delete first, lest it adopt
	// the key the delete is about to remove.
	cleaning map[string]chan struct{}

	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	hooks etcdHooks
}

// etcdHooks lets the package's tests observe an acquisition. All nil outside tests.
type etcdHooks struct {
	watching func(me, pred string) // a waiter is about to wait for pred's delete
	// enqueued sees, and may replace, the error of every enqueue transaction: a test "loses"
	// the reply of a put etcd did.
	enqueued func(err error) error
	// cleaning runs in a background delete of key before it asks etcd, cleaned after.
	cleaning, cleaned func(key string)
	// awaiting reports an acquisition waiting for a background delete of its key to end.
	awaiting func(key string)
	// awaitingLease reports a waiter whose lease was lost waiting for the next one.
	awaitingLease func()
	// interceptor sits between the client and etcd: a test holds a request back, as a slow
	// network would, and lets it reach etcd later.
	interceptor grpc.UnaryClientInterceptor
}

// NewEtcdClient connects to the etcd endpoints (host:port) and grants the client's lease,
// within ctx: an unreachable etcd fails it.
func NewEtcdClient(ctx context.Context, endpoints []string, opts EtcdOptions) (*EtcdClient, error) {
	return newEtcdClient(ctx, endpoints, opts, etcdHooks{})
}

func newEtcdClient(ctx context.Context, endpoints []string, opts EtcdOptions, hooks etcdHooks) (*EtcdClient, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if opts.Process == "" {
		opts.Process = NewProcessID()
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = DefaultEtcdLeaseTTL
	}
	if opts.LeaseTTL < 2*time.Second || opts.LeaseTTL%time.Second != 0 {
		return nil, fmt.Errorf("etcd: lease TTL %s: want whole seconds, at least 2s", opts.LeaseTTL)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultEtcdPrefix
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: etcdCleanupTimeout,
		Logger:      zap.NewNop(),
	}
	if hooks.interceptor != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(hooks.interceptor)}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	c := &EtcdClient{
		cli:      cli,
		process:  opts.Process,
		prefix:   opts.Prefix,
		ttl:      opts.LeaseTTL,
		holds:    newSessionHolds(),
		cleaning: map[string]chan struct{}{},
		done:     make(chan struct{}),
		hooks:    hooks,
	}
	id, alive, stop, err := c.grant(ctx)
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	c.lease, c.gone, c.settled = id, make(chan struct{}), make(chan struct{})
	close(c.settled)
	c.wg.Add(1)
	go c.keep(id, alive, stop, c.gone)
	return c, nil
}

// Process returns the process id the client writes into lock keys.
func (c *EtcdClient) Process() string { return c.process }

// Ping asks etcd for a key within ctx, and reports an error when it does not answer or the
// client has no lease: what /readyz checks.
func (c *EtcdClient) Ping(ctx context.Context) error {
	c.mu.Lock()
	lease := c.lease
	c.mu.Unlock()
	if lease == 0 {
		return errEtcdNoLease
	}
	_, err := c.cli.Get(ctx, c.prefix+"/", clientv3.WithCountOnly())
	return err
}

// Close revokes the lease, which deletes the keys of every lock the client holds or waits
// for, ends every hold (Lost closes) and closes the connection. The client's locks then
// return ErrClosed: an acquisition ErrClosed, an Unlock an error wrapping both ErrNotHeld
// (the hold is gone, its key with the lease) and ErrClosed.
func (c *EtcdClient) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	lease := c.lease
	c.holds.close()
	c.mu.Unlock()
	close(c.done)
	c.wg.Wait()
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
		_, _ = c.cli.Revoke(ctx, lease)
		cancel()
	}
	return c.cli.Close()
}

// grant grants a lease and starts keeping it alive; alive receives each renewal's answer and
// is closed when etcd ends the lease or stop is called.
func (c *EtcdClient) grant(ctx context.Context) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, context.CancelFunc, error) {
	resp, err := c.cli.Grant(ctx, int64(c.ttl/time.Second))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("grant lease: %w", err)
	}
	// The keep-alive lives until stop, not until ctx, which bounds only the grant.
	kctx, stop := context.WithCancel(context.Background())
	alive, err := c.cli.KeepAlive(kctx, resp.ID)
	if err != nil {
		stop()
		return 0, nil, nil, fmt.Errorf("keep lease alive: %w", err)
	}
	return resp.ID, alive, stop, nil
}

// keep follows lease id's renewals until it is lost or the client closes, then grants the
// next lease and follows that one.
func (c *EtcdClient) keep(id clientv3.LeaseID, alive <-chan *clientv3.LeaseKeepAliveResponse, stop context.CancelFunc, gone chan struct{}) {
	defer c.wg.Done()
	for {
		lost := c.follow(alive, gone)
		stop()
		if !lost {
			return
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		if c.lease == id { // else leaseGone has reported the loss
			c.loseLease()
		}
		settled := c.settled
		c.mu.Unlock()
		// The server may still keep the lease (the renewals' answers were late, not the
		// lease gone): revoke it, so its keys do not block everyone for the rest of its TTL.
		c.wg.Add(1) // keep's own count keeps Close's Wait from passing meanwhile
		go func(id clientv3.LeaseID) {
			defer c.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
			defer cancel()
			_, _ = c.cli.Revoke(ctx, id)
		}(id)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
			next, nextAlive, nextStop, err := c.grant(ctx)
			cancel()
			if err != nil && settled != nil {
				close(settled) // the waiters of the lost lease fail: etcd did not grant the next
				settled = nil
			}
			if err == nil {
				c.mu.Lock()
				if c.closed {
					c.mu.Unlock()
					nextStop()
					rctx, rcancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
					_, _ = c.cli.Revoke(rctx, next) // Close revoked only the lease it saw
					rcancel()
					return
				}
				gone = make(chan struct{})
				c.lease, c.void, c.gone = next, 0, gone
				if settled != nil {
					close(settled)
				}
				c.mu.Unlock()
				id, alive, stop = next, nextAlive, nextStop
				break
			}
			select {
			case <-c.done:
				return
			case <-time.After(etcdLeasePause):
			}
		}
	}
}

// follow waits on one lease's renewals. It returns false when the client closes, and true
// when the lease is lost: its channel closed, no renewal answered for 2/3 of the TTL, or
// gone closed.
func (c *EtcdClient) follow(alive <-chan *clientv3.LeaseKeepAliveResponse, gone <-chan struct{}) bool {
	margin := c.ttl * 2 / 3
	t := time.NewTimer(margin)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return false
		case r, ok := <-alive:
			if !ok || r == nil || r.TTL <= 0 {
				return true
			}
			t.Reset(margin)
		case <-t.C:
			return true
		case <-gone:
			return true
		}
	}
}

// leaseGone reports that etcd answered a call made with lease that it has no such lease:
// revoked, or expired while its renewals' answers were on their way. Every key attached to
// it went with it, so the holds are lost now, not when the keep-alive's next answer (up to
// a third of the TTL later) says so; and keep grants the next lease at once.
func (c *EtcdClient) leaseGone(lease clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.lease != lease {
		return // closed, or the loss is known already
	}
	c.loseLease()
	close(c.gone)
}

// loseLease records that the client has lost its lease, and with it every hold. c.mu must be
// held.
func (c *EtcdClient) loseLease() {
	c.lease = 0
	c.holds.lose()
	c.settled = make(chan struct{})
}

// nextLease returns a channel closed once the client has a lease, or once its first grant
// since it lost the last one has failed; current then tells which.
func (c *EtcdClient) nextLease() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settled
}

// current returns the lease an acquisition writes its key with, the epoch it starts in and
// the channel closed when that lease is lost.
func (c *EtcdClient) current() (clientv3.LeaseID, uint64, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return 0, 0, nil, ErrClosed
	case c.lease == 0:
		return 0, 0, nil, errEtcdNoLease
	}
	epoch, lost, _ := c.holds.current()
	return c.lease, epoch, lost, nil
}
