package admission

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock, which time.Now reads too:
// reading it alone costs about half as much as time.Now, which matters on
// the admission path. runtime.nanotime is kept callable by linkname
// (go.dev/issue/67401: widely used packages reach it so).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// cheaprand is the runtime's per-thread wyrand generator: no lock, no
// atomic, about a nanosecond, which math/rand/v2's ChaCha8 is not (it
// cost a quarter of an admission). It picks the requests a sampling
// Limiter times, where nothing needs to be seeded or secret. Kept
// callable by linkname as nanotime is (go.dev/issue/67401).
//
//go:linkname cheaprand runtime.cheaprand
func cheaprand() uint32
