package backoff

import _ "unsafe" // for go:linkname

// runtimeRand is the runtime's generator, which math/rand/v2's global
// functions draw from (per-thread ChaCha8 state, safe for concurrent use,
// seeded at start-up): calling it directly skips rand.Uint64's interface
// call to its runtimeSource. runtime.rand is kept callable by linkname
// ("Do not change signature: used via linkname from other packages").
//
//go:linkname runtimeRand runtime.rand
func runtimeRand() uint64
