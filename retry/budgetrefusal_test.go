package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

// emptyBudget refuses every retry.
type emptyBudget struct{}

func (emptyBudget) Record(bool, error)  {}
func (emptyBudget) Withdraw(error) bool { return false }

// A call that an empty budget stops after one failed attempt allocates at
// most once: the *Error it gives up with.
func TestEmptyBudgetRefusalAllocs(t *testing.T) {
	ctx := context.Background()
	op := func(context.Context) (int, error) { return 0, errFlaky }
	for name, p := range map[string]*retry.Policy{
		"Budget":                    {Budget: emptyBudget{}, Backoff: backoff.Constant{}},
		"Budget and DefaultBackoff": {Budget: emptyBudget{}},
	} {
		_, err := retry.Do(ctx, p, op)
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != retry.ErrBudgetExhausted || re.Last != errFlaky {
			t.Fatalf("%s: Do error %#v, want ErrBudgetExhausted after 1 attempt", name, err)
		}
		if n := testing.AllocsPerRun(100, func() { retry.Do(ctx, p, op) }); n > 1 {
			t.Errorf("%s: a call refused by an empty budget after one failure: %v allocs, want at most 1", name, n)
		}
	}
}
