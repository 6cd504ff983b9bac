#include "textflag.h"

// func getg() unsafe.Pointer
// The runtime keeps the running goroutine's g in thread-local storage.
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
