//go:build race

package main

// raceEnabled: the tests are built with the race detector (see fullModel).
const raceEnabled = true
