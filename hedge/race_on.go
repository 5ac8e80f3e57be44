//go:build race

package hedge

// raceBuild: the race detector cannot see that the goroutines of one P
// take turns, so the per-P call cells (pool.go) are not used.
const raceBuild = true
