package admission

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock, which time.Now reads too:
// reading it alone costs about half as much as time.Now, which matters on
// the admission path. runtime.nanotime is kept callable by linkname
// (go.dev/issue/67401: widely used packages reach it so).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
