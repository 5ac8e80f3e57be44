package throttle

import "github.com/stormguard/stormguard/retry"

// overloadMarked reports whether err carries the "overloaded, don't retry"
// marker of the retry package (retry.Overloaded, retry.ErrOverloaded).
func overloadMarked(err error) bool { return retry.IsOverloaded(err) }
