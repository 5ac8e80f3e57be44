package throttle

// overloadMarked reports whether err carries the "overloaded, don't retry"
// marker of the retry package.
func overloadMarked(err error) bool {
	return false // until retry.ErrOverloaded lands (seam S4)
}
