package budget_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/budget"
)

func checkActive(t *testing.T, c *budget.Concurrency, requests, retries int64) {
	t.Helper()
	if r, q := c.Active(); r != requests || q != retries {
		t.Fatalf("Active() = %d requests, %d retries; want %d, %d", r, q, requests, retries)
	}
}

func TestConcurrencyDefaults(t *testing.T) {
	c := budget.NewConcurrency(budget.ConcurrencyConfig{})
	// Nothing in flight: MinConcurrency (3) retries may be active.
	checkAvailable(t, c, 3)
	if got := withdrawN(c, 5, errDown); got != 3 {
		t.Fatalf("granted %d, want 3", got)
	}
	checkActive(t, c, 0, 3)
	c.Refund() // one is abandoned during its wait
	checkActive(t, c, 0, 2)
	c.Start(true) // one starts
	checkActive(t, c, 1, 2)
	if !c.Withdraw(errDown) {
		t.Fatal("refused with 2 of 3 active")
	}
	c.Record(true, errDown) // it ends: its reservation is released
	checkActive(t, c, 0, 2)
	want := budget.Stats{Retries: 1, Granted: 4, Refused: 2, Refunded: 1}
	if got := c.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func TestConcurrencyPercent(t *testing.T) {
	c := budget.NewConcurrency(budget.ConcurrencyConfig{})
	for _, tc := range []struct {
		active int
		limit  float64
	}{
		{14, 3}, // 20% of 14 = 2.8: the minimum wins
		{24, 4}, // 4.8, rounded down
		{100, 20},
	} {
		for range tc.active {
			c.Start(false)
		}
		checkAvailable(t, c, tc.limit)
		if got := withdrawN(c, 100, errDown); float64(got) != tc.limit {
			t.Fatalf("%d active: granted %d, want %v", tc.active, got, tc.limit)
		}
		for range tc.active {
			c.Record(false, errDown)
		}
		for range int(tc.limit) {
			c.Refund()
		}
		checkActive(t, c, 0, 0)
	}
}

func TestConcurrencyNoMinimum(t *testing.T) {
	c := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: 0.5, MinConcurrency: -1})
	if c.Withdraw(errDown) {
		t.Fatal("granted with nothing active and no minimum")
	}
	c.Start(false)
	c.Start(false)
	if got := withdrawN(c, 5, errDown); got != 1 {
		t.Fatalf("granted %d with 2 active at 50%%, want 1", got)
	}
	// Unbalanced calls never drive the counts below zero.
	for range 5 {
		c.Record(true, nil)
		c.Refund()
	}
	checkActive(t, c, 0, 0)
}

func TestConcurrencyConfigValidate(t *testing.T) {
	for _, c := range []budget.ConcurrencyConfig{{}, {Ratio: -1, MinConcurrency: -1}, {Ratio: budget.MaxRatio, MinConcurrency: 1000}} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", c, err)
		}
	}
	for name, c := range map[string]budget.ConcurrencyConfig{
		"NaN percent":  {Ratio: math.NaN()},
		"huge percent": {Ratio: math.Inf(1)},
		"a percentage": {Ratio: 20},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.Validate()
			if !errors.Is(err, budget.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "budget: ") {
				t.Fatalf("Validate(%+v) = %v, want a budget: ErrInvalidConfig", c, err)
			}
			checkPanics(t, err, func() { budget.NewConcurrency(c) })
		})
	}
}
