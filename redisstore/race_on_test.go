//go:build race

package redisstore

// raceEnabled: the race detector makes sync.Pool drop objects at random,
// so pooled paths allocate under it.
const raceEnabled = true
