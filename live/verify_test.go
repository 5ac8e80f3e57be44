package live_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// deadlineScenario is the seed's verification path: a downstream far
// slower than the caller's deadline. Six clients make one call each; an
// attempt times out after 100ms, a call after 1s; retries wait 100ms and
// draw on one shared token bucket of three tokens that nothing refills
// (no attempt can succeed).
func deadlineScenario(service time.Duration) live.Scenario {
	bucket := budget.RatioConfig{MaxTokens: 3, RetryCost: 1, Refill: 0.1}
	return live.Scenario{
		Name:        "deadline",
		Clients:     6,
		Arrival:     sim.Arrival{Kind: sim.Periodic, Interval: 500 * time.Millisecond},
		Duration:    500 * time.Millisecond,
		CallTimeout: time.Second,
		Server: live.Server{
			Service: sim.Const(service),
			Timeout: 100 * time.Millisecond,
		},
		Policies: []string{"fixed+budget"},
		Custom: []sim.Policy{{
			Name:        "fixed+budget",
			MaxAttempts: 10,
			Backoff: func(rand.Source) backoff.Strategy {
				return backoff.Constant{Interval: 100 * time.Millisecond}
			},
			Budget: sim.RatioBudget(bucket),
		}},
	}
}

// TestVerificationPath: downstream latency above the caller's deadline.
// Cancellation reaches the server, no key executes twice at once, and
// retries stop once the budget is spent.
func TestVerificationPath(t *testing.T) {
	t.Parallel()
	const service = 10 * time.Second
	began := time.Now()
	rep, err := live.Run(context.Background(), deadlineScenario(service), live.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(began); el >= service {
		t.Fatalf("the run took %s, as long as the service time: the handlers did not stop", el)
	}
	row := rep.Rows[0]
	m, e := row.Metrics, row.Extra

	t.Run("cancellation reaches the server", func(t *testing.T) {
		if e.Wasted.Executions == 0 {
			t.Fatal("no execution reached the handler")
		}
		if e.Wasted.Cancelled != e.Wasted.Executions {
			t.Errorf("%d of %d executions saw their caller give up, want all", e.Wasted.Cancelled, e.Wasted.Executions)
		}
		// Each execution was stopped by its cancellation, far short of the
		// service time: the handler time is about the attempt timeouts.
		if max := float64(e.Wasted.Executions) * service.Seconds() / 10; e.Wasted.HandlerS >= max {
			t.Errorf("handler time %.2fs for %d executions: the handlers ran on after their callers left", e.Wasted.HandlerS, e.Wasted.Executions)
		}
		if e.Server.Passed != uint64(e.Wasted.Executions) {
			t.Errorf("injector passed %d requests, handler executed %d", e.Server.Passed, e.Wasted.Executions)
		}
	})

	t.Run("no key executes concurrently twice", func(t *testing.T) {
		d := e.Duplicates
		if d.MaxConcurrentPerKey != 1 || d.ConcurrentKeys != 0 {
			t.Errorf("max concurrent executions of one key %d (%d keys overlapped), want 1", d.MaxConcurrentPerKey, d.ConcurrentKeys)
		}
		if d.Keys != 6 || d.DuplicateExecutions != 3 {
			t.Errorf("keys %d, duplicate executions %d; want 6 keys, 3 duplicates (the retries)", d.Keys, d.DuplicateExecutions)
		}
		if d.DuplicateCompletions != 0 {
			t.Errorf("%d duplicate completions, want 0: no execution completed", d.DuplicateCompletions)
		}
	})

	t.Run("retries stop once the budget is spent", func(t *testing.T) {
		// The bucket holds 3 tokens, a retry costs 1, and only successes
		// refill it: exactly 3 retries, whatever the number of calls.
		if e.ServerRetries != 3 || e.ClientRetries != 3 || e.SentRetries != 3 {
			t.Errorf("retries: %d tried, %d sent, %d received; want 3 (the budget)", e.ClientRetries, e.SentRetries, e.ServerRetries)
		}
		if e.ServerAttempts != 6+3 || e.ClientAttempts != 6+3 || e.ClientSent != 6+3 {
			t.Errorf("attempts: %d tried, %d sent, %d received; want 9", e.ClientAttempts, e.ClientSent, e.ServerAttempts)
		}
		if m.Calls != 6 || m.Succeeded != 0 {
			t.Errorf("calls %v, succeeded %v; want 6 failed calls", m.Calls, m.Succeeded)
		}
	})
}

// TestIgnoredCancellationShows is the converse: a handler that does not
// honour cancellation keeps working for callers that left, and the
// retries of one key pile up on the server.
func TestIgnoredCancellationShows(t *testing.T) {
	t.Parallel()
	sc := deadlineScenario(time.Second)
	sc.Clients = 2
	sc.Server.IgnoreCancel = true
	sc.Custom[0].Budget = nil
	sc.Custom[0].MaxAttempts = 3
	sc.Custom[0].Backoff = func(rand.Source) backoff.Strategy {
		return backoff.Constant{Interval: 20 * time.Millisecond}
	}
	rep, err := live.Run(context.Background(), sc, live.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	e := rep.Rows[0].Extra
	// The clients send their 3 attempts each whatever the machine's speed;
	// an attempt cut by its 100ms timeout before its request was written
	// (a machine too loaded to dial and write in 100ms) is not received,
	// so the server's figures are checked against what it received, not
	// against 6.
	if e.ClientAttempts != 6 || e.ClientSent != e.ServerAttempts {
		t.Fatalf("attempts made %d (want 6: 2 calls of 3 attempts), written %d, received %d (want equal)", e.ClientAttempts, e.ClientSent, e.ServerAttempts)
	}
	if e.ServerAttempts != e.Wasted.Executions || e.ServerAttempts < 2 {
		t.Fatalf("attempts received %d, executions %d; want every received attempt executed", e.ServerAttempts, e.Wasted.Executions)
	}
	if e.ServerAttempts < 6 {
		t.Logf("%d of 6 attempts reached the server in their 100ms (the machine is loaded)", e.ServerAttempts)
	}
	d := e.Duplicates
	if e.ServerAttempts > d.Keys && (d.MaxConcurrentPerKey < 2 || d.ConcurrentKeys == 0) {
		t.Errorf("max concurrent executions of one key %d, want several: the attempts overlap", d.MaxConcurrentPerKey)
	}
	if want := e.ServerAttempts - d.Keys; d.DuplicateCompletions != want {
		t.Errorf("duplicate completions %d, want %d (received %d over %d keys): every attempt completed its work", d.DuplicateCompletions, want, e.ServerAttempts, d.Keys)
	}
	if e.Wasted.Cancelled == 0 || e.Wasted.WastedS <= 0 {
		t.Errorf("wasted %.3fs over %d cancelled executions, want handler time after the callers left", e.Wasted.WastedS, e.Wasted.Cancelled)
	}
}
