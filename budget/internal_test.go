package budget

import (
	"math"
	"testing"
)

func TestShareSaturates(t *testing.T) {
	for _, tc := range []struct{ ppm, n, want int64 }{
		{200_000, 10, 2_000_000},
		{0, math.MaxInt64, 0},
		{1e9, 0, 0},
		{1e9, 1e10, math.MaxInt64 / 4},
		{1, math.MaxInt64, math.MaxInt64 / 4},
	} {
		if got := share(tc.ppm, tc.n); got != tc.want {
			t.Errorf("share(%d, %d) = %d, want %d", tc.ppm, tc.n, got, tc.want)
		}
	}
}
