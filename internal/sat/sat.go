// Package sat does saturating arithmetic on durations: a sum beyond what
// a time.Duration holds is clamped to the largest (or smallest) Duration
// instead of wrapping around, so that a bound near math.MaxInt64 stays a
// bound. (time.Time.Add and Sub already saturate.)
package sat

import (
	"math"
	"time"
)

// Add returns a + b, clamped to [math.MinInt64, math.MaxInt64].
func Add(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}
