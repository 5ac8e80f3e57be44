//go:build !race

package simtest_test

// raceEnabled: false, the tests are built without the race detector (see
// fullModel).
const raceEnabled = false
