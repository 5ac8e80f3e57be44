package redisstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
)

// Defaults for zero fields of BreakerConfig and BudgetConfig.
const (
	DefaultNamespace       = "stormguard"
	DefaultRefreshInterval = 250 * time.Millisecond
	DefaultTimeout         = 100 * time.Millisecond
	DefaultKeyTTL          = 24 * time.Hour
	DefaultProbeLease      = 10 * time.Second
)

// MaxWindowBuckets bounds Breaker.Window.Buckets for the shared breaker:
// every exchange with Redis reads every bucket of the window.
const MaxWindowBuckets = 100

// ErrInvalidConfig is wrapped by every error a config's Validate returns.
var ErrInvalidConfig = errors.New("redisstore: invalid config")

// ErrClosed is returned by Sync after Close.
var ErrClosed = errors.New("redisstore: closed")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// BreakerConfig configures a Breaker shared through Redis. Client and Name
// are required; every other zero field means its documented default.
type BreakerConfig struct {
	// Client reaches Redis: a *redis.Client, *redis.ClusterClient,
	// *redis.Ring or any redis.UniversalClient. It must be made with
	// ContextTimeoutEnabled set, so that Timeout bounds every call; NewBreaker
	// rejects the three client types above without it. The Breaker does not
	// close it.
	Client redis.Scripter

	// Name identifies the shared breaker: every process that uses the same
	// Namespace and Name shares one state. Name it after the downstream.
	// It must not contain a brace, ":=" or ":#" (see the package
	// documentation on keys); Namespace neither.
	Name string

	// Namespace prefixes every key. 0: DefaultNamespace ("stormguard").
	Namespace string

	// Breaker is the breaker's configuration: trip condition, open period,
	// probes and classification, as for breaker.New. The shared state
	// supports the consecutive-failures condition and the time window
	// (Window.Duration, with failure and slow-call rates); a count window
	// (Window.Calls), ReadyToTrip and Probe are rejected. Redis counts
	// the window in whole milliseconds: a bucket (Window.Duration over
	// Window.Buckets) below 1ms is refused, and one that is not a whole
	// number of milliseconds is rounded up to the next (a 15ms window
	// over 10 buckets is kept as 10 buckets of 2ms). It also configures
	// the local fallback breaker unless Local is set. Its OnStateChange
	// is called on changes of the state this Breaker reports (see State),
	// as a listener added with Subscribe is (a panic in it is handled the
	// same way).
	Breaker breaker.Config

	// Local, if set, configures the local breaker used while Redis cannot be
	// reached, instead of Breaker. Its OnStateChange is not called. A fresh
	// local breaker is made at every fallback, closed. A fallback from a
	// shared open or half-open state is half-open once the open period
	// ends, on this configuration's MaxProbes, SuccessThreshold,
	// OpenTimeout and OpenJitter (see the package documentation), before
	// the local breaker decides.
	Local *breaker.Config

	// RefreshInterval is how often the process flushes the outcomes it has
	// counted to Redis and refreshes its cached copy of the shared state,
	// in one round trip. A failure seen locally brings the next exchange
	// forward (to RefreshInterval/10 after the previous one at the soonest).
	// 0: DefaultRefreshInterval (250ms).
	RefreshInterval time.Duration

	// Timeout bounds every Redis call, measured on the wall clock (it bounds
	// network I/O). 0: DefaultTimeout (100ms), or RefreshInterval if that
	// is shorter.
	Timeout time.Duration

	// KeyTTL is how long the keys live after the last process used them.
	// It must exceed the longest open period, the window and ProbeLease,
	// and be at least 1s and two refresh intervals (so a RefreshInterval
	// above KeyTTL/2 is refused). It is rounded up to a whole number of
	// milliseconds, as Redis counts it. 0: DefaultKeyTTL (24h).
	KeyTTL time.Duration

	// ProbeLease is how long a half-open probe permit is held for a process
	// that took it and never reported the probe's result (it crashed, or
	// lost Redis); after it another process may probe. A result reported
	// after the lease is ignored. Redis counts it in whole milliseconds:
	// a lease below 1ms is refused, and one that is not a whole number of
	// milliseconds is rounded up to the next. 0: DefaultProbeLease (10s).
	ProbeLease time.Duration

	// Clock paces refresh intervals and times slow calls; open periods,
	// windows and probe leases are measured on Redis's clock (TIME), to
	// which a Clock other than clock.Real is anchored at the first exchange
	// (see the package documentation). nil: Breaker.Clock, and clock.Real
	// if that is nil too.
	Clock clock.Clock

	// Logger receives one warning when the process loses Redis, one
	// message when it re-joins, and an error for a listener or OnDegraded
	// that panicked on the background goroutine, and for a Clock that
	// panicked there while pacing the exchanges (they then go on paced by
	// clock.Real). nil: silent.
	Logger *slog.Logger

	// OnDegraded, if set, is called when the process falls back to local
	// state (degraded true, with the Redis error) and when it re-joins the
	// shared state (degraded false, nil). Calls are made one at a time, in
	// order, outside any lock, on the goroutine whose Redis call caused the
	// change: the background goroutine, or one calling Allow, a probe's
	// done or Sync. It is not called once Close has begun. A panic in it
	// goes on to the caller of Allow, done or Sync; on the background
	// goroutine, which has no caller, it is recovered, counted in
	// LinkStats.Panics, logged at Error level (Logger; nil: silent) unless
	// it repeats the last panic logged there, and the exchanges go on.
	OnDegraded func(degraded bool, err error)

	// BatchRefresh, in a KeyedBreakers group whose Client pipelines (a
	// *redis.Client or *redis.ClusterClient), makes one goroutine for the
	// group refresh every live member every RefreshInterval, in SyncAll's
	// pipelined exchanges (one round trip per Redis node for up to
	// MaxBatch members), instead of one goroutine and one round trip per
	// member. A failure a member sees brings the group's next refresh
	// forward (to RefreshInterval/10 after the previous one at the
	// soonest), and so does a new member, which decides on local state
	// until then (see NewBreaker). NewBreaker, and a client that does not
	// pipeline, ignore it.
	BatchRefresh bool

	// OnMemberStateChange, if set, is called as Breaker.OnStateChange is
	// (after it, for the same changes, on the same goroutine, with panics
	// handled the same way), with the Member whose state changed: a
	// KeyedBreakers group calls it with each member's key, so that a
	// listener can tell which host's breaker moved. A Breaker made by
	// NewBreaker is the default member (Member{}).
	OnMemberStateChange func(m Member, from, to breaker.State)

	// OnMemberDegraded, if set, is called as OnDegraded is (after it, for
	// the same changes, with panics handled the same way), with the Member
	// that fell back or re-joined (see OnMemberStateChange).
	OnMemberDegraded func(m Member, degraded bool, err error)
}

// Member names the member of a keyed group (KeyedBreakers, KeyedBudgets)
// that a member listener hears. A Breaker or Budget made on its own is
// Member{}.
type Member struct {
	// Key is the member's key, in full (not cut at MaxVerbatimKey as in
	// the member's name): "" for the default member and for the overflow
	// member.
	Key string
	// Overflow is set for the group's overflow member, shared by the keys
	// that found the group full; false for every other member.
	Overflow bool
}

// String returns the key, "(default)" for the default member and
// "(overflow)" for the overflow member.
func (m Member) String() string {
	switch {
	case m.Overflow:
		return "(overflow)"
	case m.Key == "":
		return "(default)"
	}
	return m.Key
}

// BudgetConfig configures a retry Budget shared through Redis. Client and
// Name are required; every other zero field means its documented default.
type BudgetConfig struct {
	// Client reaches Redis; see BreakerConfig.Client.
	Client redis.Scripter

	// Name identifies the shared budget: every process that uses the same
	// Namespace and Name draws on one bucket. It must not contain a brace,
	// ":=" or ":#"; Namespace neither.
	Name string

	// Namespace prefixes every key. 0: DefaultNamespace ("stormguard").
	Namespace string

	// Ratio is the token bucket, as for budget.NewRatio; the zero value is
	// budget.TenPercent. The fleet shares one bucket of Ratio.MaxTokens.
	Ratio budget.RatioConfig

	// Local, if set, configures the private bucket used while Redis cannot
	// be reached, instead of Ratio. A fresh private bucket is made at every
	// fallback, holding what the process could spend from the shared bucket
	// when it last reached it (its InitialTokens and StartEmpty are ignored
	// then).
	Local *budget.RatioConfig

	// LeaseTokens is how many tokens a process takes from the shared bucket
	// at a time, to grant retries from without a round trip; it tops its
	// lease up at every exchange. It bounds the slack of the fleet budget
	// (see the package documentation). 0: twice the cost of a retry (the
	// larger of RetryCost and TimeoutCost), at most MaxTokens. Unused for
	// budgets whose retries cost nothing (gRPC A6 throttling), which are
	// gated on the cached shared balance instead.
	LeaseTokens float64

	// RefreshInterval is how often deposits are flushed and the lease topped
	// up, in one round trip. An empty lease brings the next exchange forward.
	// 0: DefaultRefreshInterval (250ms).
	RefreshInterval time.Duration

	// Timeout bounds every Redis call (wall clock). 0: DefaultTimeout
	// (100ms), or RefreshInterval if that is shorter.
	Timeout time.Duration

	// KeyTTL is how long the bucket lives after the last process used it.
	// It must be at least 1s and two refresh intervals (so a
	// RefreshInterval above KeyTTL/2 is refused). It is rounded up to a
	// whole number of milliseconds, as Redis counts it. 0: DefaultKeyTTL
	// (24h).
	KeyTTL time.Duration

	// Clock paces the exchanges with Redis. nil: clock.Real.
	Clock clock.Clock

	// BatchRefresh: see BreakerConfig.BatchRefresh (for KeyedBudgets).
	BatchRefresh bool

	// Logger, OnDegraded and OnMemberDegraded: see BreakerConfig. A
	// KeyedBudgets group calls OnMemberDegraded with each member's key.
	Logger           *slog.Logger
	OnDegraded       func(degraded bool, err error)
	OnMemberDegraded func(m Member, degraded bool, err error)
}

// linkConfig is what the Breaker and the Budget share: how they reach Redis.
type linkConfig struct {
	client     redis.Scripter
	prefix     string // "<namespace>:{<name>}:"
	ns         string // the namespace
	name       string
	interval   time.Duration
	timeout    time.Duration
	ttl        time.Duration
	ttlMs      int64 // ttl in whole milliseconds, rounded up: what the scripts get
	clk        clock.Clock
	logger     *slog.Logger
	onDegraded func(bool, error)
	onMember   func(Member, bool, error) // OnMemberDegraded
	member     Member                    // which member of a keyed group, for the member listeners
}

func resolveLink(kind string, client redis.Scripter, name, ns string, interval, timeout, ttl time.Duration) (linkConfig, error) {
	l := linkConfig{client: client, name: name, interval: interval, timeout: timeout, ttl: ttl}
	if client == nil {
		return l, invalid("%s.Client is nil", kind)
	}
	if err := checkClient(client); err != nil {
		return l, invalid("%s.Client: %v", kind, err)
	}
	if name == "" {
		return l, invalid("%s.Name is empty", kind)
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	for _, f := range [...]struct{ field, v string }{{"Name", name}, {"Namespace", ns}} {
		if strings.ContainsAny(f.v, "{}") {
			return l, invalid("%s.%s %q contains a brace (keys use a {name} hash tag)", kind, f.field, f.v)
		}
		// The markers of a keyed group's members (see keyTag): a Name
		// holding one would share the Redis keys of another name's member.
		for _, m := range [...]string{":=", ":#"} {
			if strings.Contains(f.v, m) {
				return l, invalid("%s.%s %q contains %q (keyed groups' members are named NAME:=KEY and NAME:#HASH)", kind, f.field, f.v, m)
			}
		}
	}
	switch {
	case interval < 0:
		return l, invalid("%s.RefreshInterval is %v, want >= 0", kind, interval)
	case timeout < 0:
		return l, invalid("%s.Timeout is %v, want >= 0", kind, timeout)
	case ttl < 0:
		return l, invalid("%s.KeyTTL is %v, want >= 0", kind, ttl)
	}
	if l.interval == 0 {
		l.interval = DefaultRefreshInterval
	}
	if l.timeout == 0 {
		l.timeout = min(DefaultTimeout, l.interval)
	}
	if l.ttl == 0 {
		l.ttl = DefaultKeyTTL
	}
	// ttl/2 < interval is ttl < 2*interval, exactly, without overflowing
	// for a huge interval.
	if l.ttl < time.Second || l.ttl/2 < l.interval {
		return l, invalid("%s.KeyTTL %v is too short: at least 1s and two refresh intervals", kind, l.ttl)
	}
	l.ttlMs = millisUp(l.ttl) // Redis counts whole milliseconds
	l.ns = ns
	l.prefix = ns + ":{" + name + "}:"
	return l, nil
}

// checkClient rejects the go-redis clients that ignore context deadlines.
func checkClient(c redis.Scripter) error {
	var enabled bool
	switch c := c.(type) {
	case *redis.Client:
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		enabled = c.Options().ContextTimeoutEnabled
	default:
		return nil
	}
	if !enabled {
		return errors.New("ContextTimeoutEnabled is false, so Timeout could not bound Redis calls; set it in the client's options")
	}
	return nil
}

// breakerSettings is a BreakerConfig with its defaults applied.
type breakerSettings struct {
	link        linkConfig
	window      bool // time-window condition; else consecutive failures
	consecutive int64
	width       time.Duration // of one window bucket
	buckets     int
	minCalls    int64
	failPct     float64
	slowPct     float64
	slowDur     time.Duration
	openTimeout time.Duration
	maxOpen     time.Duration
	multiplier  float64
	jitter      float64
	maxProbes   int64
	successes   int64
	probeLease  time.Duration
	// The local breaker's half-open rules, for the probation that follows
	// a fallback from a shared open or half-open state (see probation).
	localProbes, localSuccesses int64
	localOpen                   time.Duration
	localJitter                 float64
	isFailure                   func(error) bool
	isExcluded                  func(error) bool
	local                       breaker.Config
	onTransition                func(from, to breaker.State)
	onMember                    func(m Member, from, to breaker.State)
	gate                        bool // open periods end by a timer (the real clock): a refusal reads no clock
}

// Validate reports whether c can make a Breaker. Errors wrap
// ErrInvalidConfig.
func (c BreakerConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c BreakerConfig) resolve() (breakerSettings, error) {
	var s breakerSettings
	l, err := resolveLink("BreakerConfig", c.Client, c.Name, c.Namespace, c.RefreshInterval, c.Timeout, c.KeyTTL)
	if err != nil {
		return s, err
	}
	bc := c.Breaker
	if err := bc.Validate(); err != nil {
		return s, fmt.Errorf("%w: BreakerConfig.Breaker: %w", ErrInvalidConfig, err)
	}
	switch {
	case bc.ReadyToTrip != nil:
		return s, invalid("BreakerConfig.Breaker.ReadyToTrip is not supported by the shared breaker (it cannot run in Redis)")
	case bc.Window.Calls > 0:
		return s, invalid("BreakerConfig.Breaker.Window.Calls is not supported by the shared breaker; use Window.Duration")
	case bc.Probe != nil:
		return s, invalid("BreakerConfig.Breaker.Probe is not supported by the shared breaker")
	case c.ProbeLease < 0:
		return s, invalid("BreakerConfig.ProbeLease is %v, want >= 0", c.ProbeLease)
	case c.ProbeLease > 0 && c.ProbeLease < time.Millisecond:
		// Redis counts whole milliseconds: a lease of 0ms has expired when
		// granted, so every caller would probe and no result would count.
		return s, invalid("BreakerConfig.ProbeLease is %v, below 1ms (Redis counts leases in whole milliseconds)", c.ProbeLease)
	}
	l.clk = clock.Or(c.Clock)
	if c.Clock == nil {
		l.clk = clock.Or(bc.Clock)
	}
	l.logger, l.onDegraded, l.onMember = c.Logger, c.OnDegraded, c.OnMemberDegraded
	d := bc.WithDefaults() // the local Breaker's rules, exactly
	s = breakerSettings{
		link:         l,
		consecutive:  int64(d.ConsecutiveFailures),
		failPct:      100 * d.Window.FailureRatio,
		slowPct:      100 * d.Window.SlowCallRatio,
		slowDur:      d.Window.SlowCallDuration,
		openTimeout:  d.OpenTimeout,
		maxOpen:      d.MaxOpenTimeout,
		multiplier:   d.OpenTimeoutMultiplier,
		jitter:       max(d.OpenJitter, 0),
		maxProbes:    int64(d.MaxProbes),
		successes:    int64(d.SuccessThreshold),
		probeLease:   ceilMillis(c.ProbeLease),
		isFailure:    d.IsFailure,
		isExcluded:   d.IsExcluded,
		onTransition: d.OnStateChange,
		onMember:     c.OnMemberStateChange,
		gate:         l.clk == clock.Real,
	}
	var window time.Duration // what the window's buckets span (none: 0)
	if w := d.Window; w.Duration > 0 {
		s.window = true
		s.buckets = w.Buckets
		if s.buckets > MaxWindowBuckets {
			return s, invalid("BreakerConfig.Breaker.Window.Buckets is %d, above MaxWindowBuckets (%d)", s.buckets, MaxWindowBuckets)
		}
		s.width = w.Duration / time.Duration(s.buckets)
		if s.width < time.Millisecond {
			return s, invalid("BreakerConfig.Breaker.Window.Duration %v over %d buckets is below 1ms per bucket", w.Duration, s.buckets)
		}
		s.width = ceilMillis(s.width) // Redis counts whole milliseconds
		s.minCalls = int64(w.MinCalls)
		// The window its rounded buckets span; past the longest duration
		// (a window within Buckets ms of it), the window asked for.
		window = w.Duration
		if s.width <= math.MaxInt64/time.Duration(s.buckets) {
			window = max(window, time.Duration(s.buckets)*s.width)
		}
	}
	if s.probeLease == 0 {
		s.probeLease = DefaultProbeLease
	}
	if longest := max(s.maxOpen, window, s.probeLease); l.ttl <= longest {
		return s, invalid("BreakerConfig.KeyTTL %v must exceed the longest open period, window and probe lease (%v)", l.ttl, longest)
	}
	s.local = bc
	if c.Local != nil {
		s.local = *c.Local
		if err := s.local.Validate(); err != nil {
			return s, fmt.Errorf("%w: BreakerConfig.Local: %w", ErrInvalidConfig, err)
		}
	}
	s.local.OnStateChange = nil
	ld := s.local.WithDefaults()
	s.localProbes, s.localSuccesses = int64(ld.MaxProbes), int64(ld.SuccessThreshold)
	s.localOpen, s.localJitter = ld.OpenTimeout, max(ld.OpenJitter, 0)
	if s.local.Clock == nil {
		s.local.Clock = l.clk
	}
	return s, nil
}

// ceilMillis rounds d up to a whole number of milliseconds, the unit of
// every duration the scripts get; a d within 1ms of the longest Duration
// is rounded down instead, so that it does not wrap.
func ceilMillis(d time.Duration) time.Duration {
	r := d % time.Millisecond
	switch {
	case r <= 0:
		return d
	case d > math.MaxInt64-time.Millisecond:
		return d - r
	}
	return d - r + time.Millisecond
}

// millisUp returns d in whole milliseconds, rounded up.
func millisUp(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// tokenUnit matches the budget package: token amounts are integer
// millionths of a token, in Go and in Redis alike.
const tokenUnit = 1e6

func toUnits(x float64) int64   { return int64(math.Round(x * tokenUnit)) }
func fromUnits(u int64) float64 { return float64(u) / tokenUnit }

// budgetSettings is a BudgetConfig with its defaults applied, amounts in
// token units.
type budgetSettings struct {
	link                         linkConfig
	max, initial, threshold      int64
	refill, retryRefill          int64
	retryCost, timeoutCost, fail int64
	throttleCost                 int64
	refund                       bool
	lease                        int64
	local                        budget.RatioConfig
}

// Validate reports whether c can make a Budget. Errors wrap
// ErrInvalidConfig.
func (c BudgetConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c BudgetConfig) resolve() (budgetSettings, error) {
	var s budgetSettings
	l, err := resolveLink("BudgetConfig", c.Client, c.Name, c.Namespace, c.RefreshInterval, c.Timeout, c.KeyTTL)
	if err != nil {
		return s, err
	}
	l.clk = clock.Or(c.Clock)
	l.logger, l.onDegraded, l.onMember = c.Logger, c.OnDegraded, c.OnMemberDegraded
	r, err := c.Ratio.WithDefaults()
	if err != nil {
		return s, fmt.Errorf("%w: BudgetConfig.Ratio: %w", ErrInvalidConfig, err)
	}
	s = budgetSettings{
		link:         l,
		max:          toUnits(r.MaxTokens),
		initial:      toUnits(r.InitialTokens),
		threshold:    toUnits(r.Threshold),
		refill:       toUnits(r.Refill),
		retryRefill:  toUnits(r.RetryRefill),
		retryCost:    toUnits(r.RetryCost),
		timeoutCost:  toUnits(r.TimeoutCost),
		throttleCost: toUnits(r.ThrottleCost),
		fail:         toUnits(r.FailureCost),
		refund:       r.RefundRetrySuccess,
	}
	switch cost := max(s.retryCost, s.timeoutCost, s.throttleCost); {
	case c.LeaseTokens < 0 || math.IsNaN(c.LeaseTokens) || c.LeaseTokens > budget.MaxRatioTokens:
		return s, invalid("BudgetConfig.LeaseTokens is %v, want a number from 0 to MaxRatioTokens", c.LeaseTokens)
	case c.LeaseTokens > 0:
		s.lease = toUnits(c.LeaseTokens)
		if s.lease < cost {
			return s, invalid("BudgetConfig.LeaseTokens %v is below the cost of one retry (%v)", c.LeaseTokens, fromUnits(cost))
		}
	default:
		s.lease = min(2*cost, s.max)
	}
	s.local = c.Ratio
	if c.Local != nil {
		s.local = *c.Local
		if err := s.local.Validate(); err != nil {
			return s, fmt.Errorf("%w: BudgetConfig.Local: %w", ErrInvalidConfig, err)
		}
	}
	return s, nil
}
