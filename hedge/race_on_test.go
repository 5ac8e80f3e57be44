//go:build race

package hedge_test

// raceEnabled: the race detector makes sync.Pool drop values, so
// allocation counts do not hold.
const raceEnabled = true
