// Package pitfall runs the wrong Redis locks from the source articles as scripted,
// deterministic scenarios, each beside its fix, and records what every client did.
//
// Each pitfall lives in its own file (p01_inprocess.go … p13_reentrancy.go); its Source
// names the article and section it comes from. Its wrong lock is written as plain go-redis
// code, as a reader of the article would write it; its fix is the lock the article
// recommends, from package lock where the library has it, used only through its public
// API. A Scene drives two to four clients (Actors, one goroutine each) through a fixed
// interleaving: only one actor runs at a time, it stops at named pause points, and time
// moves only when the script says so (miniredis FastForward on the embedded server; on a real Redis, short
// PX leases and waiting until the key is actually gone). Every Redis command, every
// critical-section entry and exit, every database write lands in a timeline with logical
// timestamps (t=1, 2, …), from which the verdict is computed, never asserted by hand.
//
// Nothing here is wired into the service: the wrong locks are for reading and running.
// cmd/seckill's "pitfalls" command prints the timelines, and docs/pitfalls.md is generated
// from them (go test ./lessons/pitfall -run TestPitfallDocs -update).
package pitfall

//go:generate go test -run TestPitfallDocs -count=1 -update .
