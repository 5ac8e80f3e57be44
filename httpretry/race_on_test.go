//go:build race

package httpretry_test

// raceEnabled: the race detector makes sync.Pool drop values, so the
// bytes a request allocates do not hold (the counts, rounded down, do).
const raceEnabled = true
