package sim

import (
	"math"
	"testing"
)

func TestMeanAveragesRecoveryOverRecoveredRuns(t *testing.T) {
	m := Mean([]Metrics{
		{Calls: 10, Recovered: 1, RecoveryS: 2},
		{Calls: 20, Recovered: 0},
		{Calls: 30, Recovered: 1, RecoveryS: 4},
	})
	if m.Calls != 20 || math.Abs(m.Recovered-2.0/3) > 1e-12 || m.RecoveryS != 3 {
		t.Fatalf("mean %+v", m)
	}
	if (Mean(nil) != Metrics{}) {
		t.Fatal("mean of nothing is not zero")
	}
}
