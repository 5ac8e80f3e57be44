//go:build race

package simtest_test

// raceEnabled: the tests are built with the race detector (see fullModel).
const raceEnabled = true
