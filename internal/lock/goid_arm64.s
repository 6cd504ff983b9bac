#include "textflag.h"

// func getg() unsafe.Pointer
// The runtime keeps the running goroutine's g in the g register (R28).
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVD g, R0
	MOVD R0, ret+0(FP)
	RET
