package hedge

import (
	"testing"
	"unsafe"
)

// TestAttemptCtxSize keeps a first-attempt context, of which every call
// uses one from a slab, at 32 bytes on 64-bit platforms.
func TestAttemptCtxSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	if got := unsafe.Sizeof(attemptCtx{}); got > 32 {
		t.Errorf("attemptCtx is %d bytes, want at most 32", got)
	}
}
