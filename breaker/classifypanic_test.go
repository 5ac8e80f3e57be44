package breaker

import (
	"errors"
	"testing"
	"time"
)

// A closed-state call whose result IsFailure (or IsExcluded) panics on
// counts as a failure, under every trip condition and with slow-call
// timing, and the panic goes on.
func TestClassifyPanicCountsClosedCall(t *testing.T) {
	errOdd := errors.New("odd")
	panicky := func(err error) bool {
		if err == errOdd {
			panic("classify failed")
		}
		return true
	}
	conds := map[string]Config{
		"consecutive":  {ConsecutiveFailures: 1},
		"count window": {Window: Window{Calls: 10, MinCalls: 1, FailureRatio: 0.5}},
		"time window":  {Window: Window{Duration: 10 * time.Second, MinCalls: 1, FailureRatio: 0.5}},
		"custom":       {ReadyToTrip: func(c Counts) bool { return c.Failures >= 1 }},
		"slow calls":   {Window: Window{Calls: 10, MinCalls: 1, FailureRatio: 0.5, SlowCallDuration: time.Second}},
	}
	for name, cfg := range conds {
		for _, hook := range []string{"IsFailure", "IsExcluded"} {
			t.Run(name+"/"+hook, func(t *testing.T) {
				c := cfg
				c.OpenTimeout = time.Second
				if hook == "IsFailure" {
					c.IsFailure = panicky
				} else {
					c.IsExcluded = func(err error) bool { return !panicky(err) }
				}
				b, _ := newTest(t, c)
				done, err := b.Allow()
				if err != nil {
					t.Fatalf("closed breaker refused: %v", err)
				}
				if v := mustPanic(t, func() { done(errOdd) }); v != "classify failed" {
					t.Fatalf("panic %v, want the classifier's", v)
				}
				wantState(t, b, Open)
			})
		}
	}
}
