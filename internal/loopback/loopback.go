// Package loopback places servers of a process that must come back on their own address
// after a stop (the embedded Redis nodes of the RedLock lessons and tests, the redis-server,
// mariadbd, etcd and nginx processes the tests start): on 127.0.0.1, at a port below Linux's
// ephemeral range (32768-60999 by default). The kernel never gives such a port to a client
// socket, so while the server is down no connection, of this process or of a test running
// beside it, can take its port, and the restart finds it free. A port the kernel chose (":0")
// lies in the ephemeral range: a restart there can fail with "address already in use".
//
// A port Start or StartOn hands out stays reserved for the rest of the process, across the
// server's stops and restarts: a lock file per port (flock), which every process placing its
// servers here honours, so that two test binaries of `go test ./...`, or two helpers of one,
// never choose the same port, even while one of them is down for a restart. The kernel drops
// the reservations when the process ends, however it ends. A process that does not use this
// package may still hold a port: the server's own listen fails then, and Start tries another.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// The ports Start picks from: above the usual fixed ports of servers, below the ephemeral
// range.
const (
	PortLow  = 20000
	PortHigh = 32000 // exclusive
)

// tries is how many random ports Start tries before it gives up.
const tries = 64

// ErrReserved reports a port that a server placed by this package holds, in this process or
// another, running or down for a restart.
var ErrReserved = errors.New("loopback: port reserved by another server")

// ErrInUse is what a start function wraps when its server could not listen because another
// process holds the port, and says so only in words (a server process's log) rather than
// with syscall.EADDRINUSE.
var ErrInUse = errors.New("loopback: address already in use")

// taken reports whether err says that port was not free, so that another may do.
func taken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, ErrInUse) || errors.Is(err, ErrReserved)
}

// pick is the next port Start tries; a test replaces it to choose the ports.
var pick = func() int { return PortLow + rand.IntN(PortHigh-PortLow) }

// held are the reservations of this process, kept open until it exits: closing a file
// releases its lock.
var (
	mu   sync.Mutex
	held []*os.File
)

// Start calls start with 127.0.0.1 addresses on random ports in [PortLow, PortHigh) that no
// other server placed by this package holds, while start fails because the port is taken
// (syscall.EADDRINUSE, ErrInUse), and returns the last error when none of its tries did.
// Any other error of start is returned at once: a server that cannot start will not start on
// another port either. start is a server's listen on addr, such as miniredis's StartAddr.
// The port of the address that started stays reserved until the process exits.
func Start(start func(addr string) error) error {
	var err error
	for range tries {
		if err = StartOn(pick(), start); err == nil || !taken(err) {
			return err
		}
	}
	return fmt.Errorf("loopback: no free port in [%d, %d) after %d tries: %w", PortLow, PortHigh, tries, err)
}

// StartOn reserves port, calls start with its 127.0.0.1 address, and keeps the reservation
// until the process exits if start succeeds. It returns an error wrapping ErrReserved, without
// calling start, when another server placed by this package holds the port.
func StartOn(port int, start func(addr string) error) error {
	f, err := reserve(port)
	if err != nil {
		return err
	}
	if err := start(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		_ = f.Close()
		return err
	}
	mu.Lock()
	held = append(held, f)
	mu.Unlock()
	return nil
}

// reserve takes port's lock file without waiting.
func reserve(port int) (*os.File, error) {
	dir := filepath.Join(os.TempDir(), "seckill-loopback-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("loopback: reservations: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("loopback: reserve port %d: %w", port, err)
	}
	// Each open file has a lock of its own, so a second reservation of one port in this
	// process is refused as one from another process is.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: 127.0.0.1:%d", ErrReserved, port)
		}
		return nil, fmt.Errorf("loopback: reserve port %d: %w", port, err)
	}
	return f, nil
}

// Closed returns a 127.0.0.1 address, reserved as Start's are, where nothing listens: a
// connection to it is refused for as long as the process runs. A port the kernel chose and
// that was closed again is not that: a server of a test running beside, listening on ":0",
// can be given it, and the "dead" address answers.
func Closed() (string, error) {
	var addr string
	err := Start(func(a string) error {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		addr = a
		return ln.Close()
	})
	return addr, err
}
