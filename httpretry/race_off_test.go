//go:build !race

package httpretry_test

const raceEnabled = false
