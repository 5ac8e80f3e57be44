//go:build race

package sim

// raceEnabled: the tests are built with the race detector (see fullModel).
const raceEnabled = true
