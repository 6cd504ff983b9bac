// Package loopback places servers of a process that must come back on their own address
// after a stop (the embedded Redis nodes of the RedLock lessons and tests): on 127.0.0.1, at a
// port below Linux's ephemeral range (32768-60999 by default). The kernel never gives such a
// port to a client socket, so while the server is down no connection, of this process or of a
// test running beside it, can take its port, and the restart finds it free. A port the kernel
// chose (":0") lies in the ephemeral range: a restart there can fail with "address already in
// use".
package loopback

import (
	"fmt"
	"math/rand/v2"
)

// The ports Start picks from: above the usual fixed ports of servers, below the ephemeral
// range.
const (
	PortLow  = 20000
	PortHigh = 32000 // exclusive
)

// tries is how many random ports Start tries before it gives up.
const tries = 64

// Start calls start with 127.0.0.1 addresses on random ports in [PortLow, PortHigh) until it
// succeeds, and returns the last error when none of its tries did (each port may be taken).
// start is a server's listen on addr, such as miniredis's StartAddr.
func Start(start func(addr string) error) error {
	var err error
	for range tries {
		if err = start(fmt.Sprintf("127.0.0.1:%d", PortLow+rand.IntN(PortHigh-PortLow))); err == nil {
			return nil
		}
	}
	return fmt.Errorf("loopback: no free port in [%d, %d) after %d tries: %w", PortLow, PortHigh, tries, err)
}
