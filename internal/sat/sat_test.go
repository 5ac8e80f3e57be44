package sat

import (
	"math"
	"testing"
	"time"
)

func TestAddSaturates(t *testing.T) {
	const maxD, minD = time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for _, c := range []struct{ a, b, want time.Duration }{
		{1, 2, 3},
		{-1, -2, -3},
		{maxD, 1, maxD},
		{maxD - time.Millisecond, time.Second, maxD},
		{1, maxD, maxD},
		{maxD, maxD, maxD},
		{minD, -1, minD},
		{minD, minD, minD},
		{maxD, minD, -1},
		{maxD, -1, maxD - 1},
		{minD, 1, minD + 1},
	} {
		if got := Add(c.a, c.b); got != c.want {
			t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
