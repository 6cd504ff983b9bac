//go:build amd64 || arm64

package lock

import (
	"sync"
	"unsafe"
)

// getg returns the runtime's g of the calling goroutine (goid_*.s).
func getg() unsafe.Pointer

// goidOffset is where the goroutine id lies in the runtime's g, or -1 when calibration
// could not find one offset that every probe agreed on.
var goidOffset = calibrateGoid()

// gScan bounds the search: the id sits well inside g, which is several hundred bytes.
const gScan = 256

// calibrateGoid finds the offset of the goroutine id in g by comparing g's words with the
// id that runtime.Stack prints, in several fresh goroutines (each with a new id): an offset
// must match in all of them. The layout of g is private to the runtime and changes between
// Go versions, so it is found rather than assumed, as github.com/petermattis/goid
// (CockroachDB) hard-codes it per version.
func calibrateGoid() int {
	var common map[uintptr]bool
	for range 4 {
		var found []uintptr
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := stackGoroutineID()
			g := getg()
			for off := uintptr(0); off < gScan; off += 8 {
				if *(*uint64)(unsafe.Add(g, off)) == id {
					found = append(found, off)
				}
			}
		}()
		wg.Wait()
		next := make(map[uintptr]bool)
		for _, off := range found {
			if common == nil || common[off] {
				next[off] = true
			}
		}
		common = next
	}
	if len(common) != 1 {
		return -1
	}
	for off := range common {
		return int(off)
	}
	return -1
}

// fastGoroutineID reads the calling goroutine's id from its g: a few nanoseconds instead of
// runtime.Stack's microseconds (which grow with the depth of the stack).
func fastGoroutineID() (uint64, bool) {
	if goidOffset < 0 {
		return 0, false
	}
	return *(*uint64)(unsafe.Add(getg(), goidOffset)), true
}
