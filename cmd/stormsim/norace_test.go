//go:build !race

package main

// raceEnabled: false, the tests are built without the race detector (see
// fullModel).
const raceEnabled = false
