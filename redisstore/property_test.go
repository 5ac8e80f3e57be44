package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

// TestBudgetConservesTokens: whatever the interleaving of records,
// withdrawals and exchanges of up to three processes, the fleet budget
// never creates tokens: the tokens spent on retries, plus those held in
// leases, plus those left in the shared bucket, are at most the bucket's
// initial tokens plus the deposits recorded. Hence retries × cost ≤
// InitialTokens + deposits, the bound stated in the package documentation.
func TestBudgetConservesTokens(t *testing.T) {
	srv := sharedRedis(t)
	var conns [3]*redis.Client
	for i := range conns {
		conns[i] = newClient(t, srv.addr)
	}
	configs := []budget.RatioConfig{
		budget.TenPercent(),
		awsretry.StandardLegacy(),
		awsretry.Standard2026(),
		{MaxTokens: 5, Refill: 0.5, RetryCost: 2, TimeoutCost: 3, RetryRefill: 0.25, RefundRetrySuccess: true},
		{MaxTokens: 3, Refill: 0.2, RetryCost: 1, FailureCost: 0.5, StartEmpty: true},
	}
	rapid.Check(t, func(rt *rapid.T) {
		rc := rapid.SampledFrom(configs).Draw(rt, "config")
		n := rapid.IntRange(1, 3).Draw(rt, "processes")
		leaseMul := rapid.IntRange(0, 3).Draw(rt, "lease") // 0: default
		fc := clocktest.NewFake()
		ns := namespace(t)
		cfg := BudgetConfig{Client: conns[0], Name: "p", Namespace: ns, Ratio: rc, Clock: fc, Timeout: time.Second}
		s, err := cfg.resolve()
		if err != nil {
			rt.Fatal(err)
		}
		if leaseMul > 0 {
			cfg.LeaseTokens = fromUnits(max(s.retryCost, s.timeoutCost)) * float64(leaseMul)
		}
		bs := make([]*Budget, n)
		for i := range bs {
			c := cfg
			c.Client = conns[i]
			b, err := NewBudget(c)
			if err != nil {
				rt.Fatal(err)
			}
			defer b.Close()
			bs[i] = b
		}
		for _, b := range bs { // let the first background exchanges finish
			for b.Stats().Link.Syncs == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		var spent, deposits int64
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			i := rapid.IntRange(0, n-1).Draw(rt, "process")
			b := bs[i]
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
			case 0, 1: // an attempt's result
				isRetry := op == 1
				ok := rapid.Bool().Draw(rt, "ok")
				var err error
				if !ok {
					err = errDown
				}
				b.Record(isRetry, err)
				switch {
				case ok && !isRetry:
					deposits += s.refill
				case ok:
					deposits += s.retryRefill
					if s.refund {
						deposits += s.retryCost
					}
				}
			case 2, 3, 5: // a retry asked for
				err := errDown
				switch op {
				case 3:
					err = retry.ErrAttemptTimeout
				case 5:
					err = throttled{}
				}
				if b.Withdraw(err) {
					spent += b.cost(err)
				}
			case 4:
				if err := b.Sync(context.Background()); err != nil {
					rt.Fatal(err)
				}
			}
		}
		v, err := conns[0].HGet(context.Background(), cfg.Namespace+":{p}:budget", "tokens").Int64()
		if err != nil {
			rt.Fatal(err)
		}
		if v < 0 || v > s.max {
			rt.Fatalf("shared bucket holds %v tokens, outside [0, %v]", fromUnits(v), fromUnits(s.max))
		}
		held := v
		for _, b := range bs {
			l := b.lease.Load()
			if l < 0 {
				rt.Fatalf("negative lease %v", fromUnits(l))
			}
			held += l
		}
		if spent+held > s.initial+deposits {
			rt.Fatalf("spent %v + held %v > initial %v + deposits %v: tokens were created",
				fromUnits(spent), fromUnits(held), fromUnits(s.initial), fromUnits(deposits))
		}
	})
}

// FuzzDecodeState: script replies of any shape are rejected or decoded
// into a valid state, never a panic.
func FuzzDecodeState(f *testing.F) {
	f.Add(int64(0), int64(1893456000000), int64(0), int64(0), uint8(4))
	f.Add(int64(2), int64(7), int64(1893456060000), int64(0), uint8(9))
	f.Add(int64(1), int64(9), int64(-1), int64(3), uint8(4))
	f.Add(int64(3), int64(-1), int64(0), int64(-5), uint8(2))
	f.Fuzz(func(t *testing.T, st, gen, until, inuse int64, n uint8) {
		b := &Breaker{tc: newScriptTime(clocktest.NewFake())}
		b.tc.own = &anchor{clk0: time.UnixMilli(0)} // script times are Unix ms
		v := []int64{st, gen, until, inuse, 0, 0, 0, 0, 0}[:min(int(n%10), 9)]
		s, err := b.decodeState(v, 4)
		if err != nil {
			return
		}
		if len(v) < 5 || s.st > breaker.Open || s.gen != uint64(gen) || gen < 0 || inuse < 0 || s.inuse != inuse || s.until.UnixMilli() != until {
			t.Fatalf("decodeState(%v) = %+v, accepted an invalid reply", v, s)
		}
	})
}

// throttled is an AWS throttling answer (awsretry.IsThrottle).
type throttled struct{}

func (throttled) Error() string     { return "ThrottlingException" }
func (throttled) ErrorCode() string { return "ThrottlingException" }

// A fleet budget on the AWS 2026 quota charges a retry after throttling 5
// tokens, others 14, as budget.Ratio does.
func TestBudgetThrottleCost(t *testing.T) {
	if !awsretry.IsThrottle(throttled{}) {
		t.Fatal("test premise: throttled is a throttle")
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	s, err := BudgetConfig{Client: rdb, Name: "p", Ratio: awsretry.Standard2026()}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	b := &Budget{s: s}
	if got, want := b.cost(throttled{}), toUnits(5); got != want {
		t.Fatalf("a retry after throttling costs %v, want 5", fromUnits(got))
	}
	if got, want := b.cost(errDown), toUnits(14); got != want {
		t.Fatalf("a retry after a 500 costs %v, want 14", fromUnits(got))
	}
}
