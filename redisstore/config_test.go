package redisstore

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
)

// offlineClient is a client that is never used to reach a server: the
// configuration tests make no Redis call.
func offlineClient(t *testing.T) *redis.Client {
	return newClient(t, "127.0.0.1:1")
}

func TestBreakerConfigValidate(t *testing.T) {
	c := offlineClient(t)
	noCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer noCtx.Close()
	ok := BreakerConfig{Client: c, Name: "payments"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*BreakerConfig)
		want string
	}{
		{"nil client", func(c *BreakerConfig) { c.Client = nil }, "Client is nil"},
		{"client ignoring deadlines", func(c *BreakerConfig) { c.Client = noCtx }, "ContextTimeoutEnabled"},
		{"no name", func(c *BreakerConfig) { c.Name = "" }, "Name is empty"},
		{"brace in name", func(c *BreakerConfig) { c.Name = "a{b}" }, "brace"},
		{"brace in namespace", func(c *BreakerConfig) { c.Namespace = "}" }, "brace"},
		{"negative interval", func(c *BreakerConfig) { c.RefreshInterval = -1 }, "RefreshInterval"},
		{"negative timeout", func(c *BreakerConfig) { c.Timeout = -1 }, "Timeout"},
		{"negative ttl", func(c *BreakerConfig) { c.KeyTTL = -1 }, "KeyTTL"},
		{"short ttl", func(c *BreakerConfig) { c.KeyTTL = 500 * time.Millisecond }, "too short"},
		{"ttl within the open period", func(c *BreakerConfig) { c.KeyTTL = 30 * time.Second }, "must exceed"},
		{"negative lease", func(c *BreakerConfig) { c.ProbeLease = -1 }, "ProbeLease"},
		{"bad breaker config", func(c *BreakerConfig) { c.Breaker.ConsecutiveFailures = -1 }, "breaker: ConsecutiveFailures"},
		{"custom condition", func(c *BreakerConfig) { c.Breaker.ReadyToTrip = func(breaker.Counts) bool { return false } }, "ReadyToTrip"},
		{"count window", func(c *BreakerConfig) { c.Breaker.Window.Calls = 10 }, "Window.Calls"},
		{"active probe", func(c *BreakerConfig) { c.Breaker.Probe = func(context.Context) error { return nil } }, "Probe"},
		{"fine window", func(c *BreakerConfig) { c.Breaker.Window.Duration = 5 * time.Millisecond }, "below 1ms"},
		{"many buckets", func(c *BreakerConfig) { c.Breaker.Window = breaker.Window{Duration: time.Minute, Buckets: 200} }, "MaxWindowBuckets"},
		{"bad local config", func(c *BreakerConfig) { c.Local = &breaker.Config{MaxProbes: -1} }, "Local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if !strings.HasPrefix(err.Error(), "redisstore: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %q, want a redisstore error mentioning %q", err, tt.want)
			}
			if b, nerr := NewBreaker(cfg); b != nil || !errors.Is(nerr, ErrInvalidConfig) {
				t.Fatalf("NewBreaker = %v, %v", b, nerr)
			}
		})
	}
}

func TestBreakerConfigDefaults(t *testing.T) {
	s, err := BreakerConfig{Client: offlineClient(t), Name: "n"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	l := s.link
	if l.prefix != "stormguard:{n}:" || l.interval != DefaultRefreshInterval || l.timeout != DefaultTimeout || l.ttl != DefaultKeyTTL {
		t.Fatalf("link defaults = %+v", l)
	}
	if s.window || s.consecutive != breaker.DefaultConsecutiveFailures || s.openTimeout != breaker.DefaultOpenTimeout ||
		s.maxProbes != 1 || s.successes != 1 || s.probeLease != DefaultProbeLease || s.jitter != breaker.DefaultOpenJitter {
		t.Fatalf("breaker defaults = %+v", s)
	}
	s, err = BreakerConfig{Client: offlineClient(t), Name: "n", RefreshInterval: 20 * time.Millisecond,
		Breaker: breaker.Config{Window: breaker.Window{Duration: time.Minute}, MaxProbes: 3, OpenJitter: -1}}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !s.window || s.buckets != breaker.DefaultBuckets || s.width != 6*time.Second || s.minCalls != breaker.DefaultMinCalls ||
		s.failPct != 100*breaker.DefaultFailureRatio || s.successes != 3 || s.jitter != 0 || s.link.timeout != 20*time.Millisecond {
		t.Fatalf("window defaults = %+v", s)
	}
}

func TestBudgetConfigValidate(t *testing.T) {
	ok := BudgetConfig{Client: offlineClient(t), Name: "search"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*BudgetConfig)
		want string
	}{
		{"nil client", func(c *BudgetConfig) { c.Client = nil }, "Client is nil"},
		{"no name", func(c *BudgetConfig) { c.Name = "" }, "Name is empty"},
		{"bad ratio", func(c *BudgetConfig) { c.Ratio.MaxTokens = -1 }, "budget: invalid config"},
		{"lease below a retry", func(c *BudgetConfig) { c.LeaseTokens = 0.5 }, "below the cost"},
		{"negative lease", func(c *BudgetConfig) { c.LeaseTokens = -1 }, "LeaseTokens"},
		{"NaN lease", func(c *BudgetConfig) { c.LeaseTokens = math.NaN() }, "LeaseTokens"},
		{"bad local", func(c *BudgetConfig) { c.Local = &budget.RatioConfig{Threshold: 100} }, "Local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
			if b, nerr := NewBudget(cfg); b != nil || !errors.Is(nerr, ErrInvalidConfig) {
				t.Fatalf("NewBudget = %v, %v", b, nerr)
			}
		})
	}
}

func TestBudgetConfigDefaults(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		ratio                 budget.RatioConfig
		lease, cost, timeout  float64
		initial, max, thresh_ float64
	}{
		{"ten percent", budget.TenPercent(), 2, 1, 1, 10, 10, 0},
		{"zero value", budget.RatioConfig{}, 2, 1, 1, 10, 10, 0},
		{"aws", awsretry.StandardLegacy(), 20, 5, 10, 500, 500, 0},
		{"grpc", budget.GRPC(), 0, 0, 0, 10, 10, 5},
		{"start empty", budget.RatioConfig{StartEmpty: true, MaxTokens: 1}, 1, 1, 1, 0, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := BudgetConfig{Client: offlineClient(t), Name: "n", Ratio: tt.ratio}.resolve()
			if err != nil {
				t.Fatal(err)
			}
			got := []float64{fromUnits(s.lease), fromUnits(s.retryCost), fromUnits(s.timeoutCost), fromUnits(s.initial), fromUnits(s.max), fromUnits(s.threshold)}
			want := []float64{tt.lease, tt.cost, tt.timeout, tt.initial, tt.max, tt.thresh_}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("lease, cost, timeout cost, initial, max, threshold = %v, want %v", got, want)
				}
			}
		})
	}
}

// TestNilReceivers: a nil Breaker admits everything and a nil Budget
// grants everything, without panicking.
func TestNilReceivers(t *testing.T) {
	var b *Breaker
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errDown)
	if b.Ready() != nil || b.State() != breaker.Closed || b.Generation() != 0 ||
		b.Counts() != (breaker.Counts{}) || b.Stats() != (LinkStats{}) || b.Sync(context.Background()) != nil {
		t.Fatal("nil Breaker is not inert")
	}
	b.Subscribe(func(breaker.State, breaker.State) {})()
	b.Close()

	var bu *Budget
	bu.Record(false, errDown)
	if !bu.Withdraw(errDown) || !math.IsInf(bu.Available(), 1) || bu.Lease() != 0 ||
		bu.Stats() != (BudgetStats{}) || bu.Sync(context.Background()) != nil {
		t.Fatal("nil Budget is not inert")
	}
	bu.Close()
}

// TestHugeRefreshIntervalRefused (issue 32 item 14): the KeyTTL check
// compares KeyTTL with two refresh intervals without overflowing, so a
// huge RefreshInterval is refused instead of passing it.
func TestHugeRefreshIntervalRefused(t *testing.T) {
	c := offlineClient(t)
	for _, interval := range []time.Duration{math.MaxInt64/2 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		for _, ttl := range []time.Duration{0, 100 * 365 * 24 * time.Hour, math.MaxInt64} {
			berr := BreakerConfig{Client: c, Name: "n", RefreshInterval: interval, KeyTTL: ttl}.Validate()
			uerr := BudgetConfig{Client: c, Name: "n", RefreshInterval: interval, KeyTTL: ttl}.Validate()
			for _, err := range []error{berr, uerr} {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "two refresh intervals") {
					t.Errorf("RefreshInterval %v, KeyTTL %v: Validate = %v, want the KeyTTL check to refuse it", interval, ttl, err)
				}
			}
		}
	}
	// Exactly two intervals is enough.
	if err := (BudgetConfig{Client: c, Name: "n", RefreshInterval: time.Hour, KeyTTL: 2 * time.Hour}).Validate(); err != nil {
		t.Fatalf("KeyTTL of two intervals: %v", err)
	}
	if err := (BudgetConfig{Client: c, Name: "n", RefreshInterval: time.Hour, KeyTTL: 2*time.Hour - 1}).Validate(); err == nil {
		t.Fatal("KeyTTL 1ns short of two intervals: accepted")
	}
}
