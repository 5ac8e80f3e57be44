package promretry

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/internal/labels"
	"github.com/stormguard/stormguard/retry"
)

// Defaults used for zero Config fields.
const (
	// DefaultNamespace prefixes every metric name.
	DefaultNamespace = "stormguard"
	// DefaultMaxOperations bounds the number of distinct operation label
	// values one Collector creates.
	DefaultMaxOperations = 100
	// OverflowOperation is the operation label value that stands for every
	// operation seen after MaxOperations distinct names.
	OverflowOperation = labels.Overflow
	// UnnamedOperation is the operation label value of a Policy whose
	// Operation is empty.
	UnnamedOperation = labels.Unnamed
)

// DefaultBuckets are the call_duration_seconds histogram's upper bounds:
// client_golang's DefBuckets extended to a minute, because a call that
// retries lasts much longer than one attempt.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Config configures a Collector. Its zero value is ready to use.
type Config struct {
	// Namespace prefixes every metric name ("<namespace>_attempts_total").
	// "": DefaultNamespace.
	Namespace string

	// ConstLabels are added to every metric (for example a service or
	// downstream name). nil: none.
	ConstLabels prometheus.Labels

	// Buckets are the upper bounds of the call_duration_seconds histogram,
	// in seconds. nil: DefaultBuckets.
	Buckets []float64

	// Operations are created (with every series at zero) by New, so that
	// dashboards and alerts see them before the first call. Other
	// operations are created on first sight. nil: none.
	Operations []string

	// MaxOperations bounds the number of distinct operation label values.
	// Past it, events of new operations are counted under
	// OverflowOperation, so a program that builds operation names from
	// request data cannot explode the series count. Queue label values are
	// bounded by the same number, separately. 0: DefaultMaxOperations.
	MaxOperations int

	// KeyedTopN is how many keys of a watched breaker group get a series
	// of their own in stormguard_breaker_open_keys (WatchKeyed), the
	// others summed under key="other", and how many keys of a watched
	// group of hedge delays get one in stormguard_hedges_key_delay_seconds,
	// the others' median under key="other". 0: DefaultKeyedTopN (10);
	// negative: none, only "other".
	KeyedTopN int
	// KeyedAllKeys gives every live key of a watched breaker group (and
	// every key of a group of hedge delays that gives a delay) its series,
	// whatever KeyedTopN: one series per key, as many as the group's
	// MaxKeys. Only when asked for. false: the top KeyedTopN.
	KeyedAllKeys bool
}

// Collector turns stormguard's events into Prometheus metrics. It
// implements retry.Observer (set it as Policy.Observer) and
// prometheus.Collector (register it with a prometheus.Registerer). Budgets,
// breakers and limiters are attached with WatchBudget, WatchBreaker and
// WatchLimiter; background
// retry queues report through QueueDropped and QueueDepth (a Scheduler
// through QueueRefused, as a queue.RefusedObserver).
//
// The metrics, with the default namespace:
//
//	stormguard_attempts_total{operation,attempt_kind="first|retry",outcome}  counter
//	stormguard_calls_total{operation,outcome}                                counter
//	stormguard_call_duration_seconds{operation}                              histogram
//	stormguard_retries_active{operation}                                     gauge
//	stormguard_retry_budget_exhausted_total{operation}                       counter
//	stormguard_retry_budget_tokens{operation}                                gauge
//	stormguard_breaker_state{operation,state}                                gauge (StateSet: 1 for the current state)
//	stormguard_breaker_transitions_total{operation,from,to}                  counter
//	stormguard_throttle_rejection_probability{operation}                     gauge
//	stormguard_throttle_local_rejections_total{operation}                    counter
//	stormguard_adaptive_fill_rate{operation}                                 gauge
//	stormguard_adaptive_measured_rate{operation}                             gauge
//	stormguard_adaptive_waits_total{operation}                               counter
//	stormguard_adaptive_refused_total{operation}                             counter
//	stormguard_limiter_info{operation,limiter}                               gauge (1: the label the operation's limiter is exported under)
//	stormguard_breaker_info{operation,breaker}                               gauge (1: the label its breaker's transitions are counted under)
//	stormguard_hedges_total{operation,result="started|won|hedge_cancelled|first_cancelled"} counter
//	stormguard_hedges_refused_total{operation,reason}                        counter
//	stormguard_hedges_delay_seconds{operation}                               gauge
//	stormguard_queue_dropped_records_total{queue}                            counter
//	stormguard_queue_refused_total{queue}                                    counter
//	stormguard_queue_depth{queue}                                            gauge
//	stormguard_config_reloads_total{result="success|failure"}                counter
//	stormguard_config_info{version}                                          gauge
//
// The last two are fed by ConfigReload. The hedge counters are fed by
// hedge.Do through the hedge.Observer methods (HedgeStarted, HedgeWon,
// HedgeCancelled, HedgeRefused): started counts hedges sent, won those
// that gave the call's result, hedge_cancelled the hedges and
// first_cancelled the attempts they hedged (a call's first attempt or a
// retry) cancelled because another answered first; refused
// counts hedges that were due but not sent, by the reason hedge.Event
// gives (budget, breaker, attempts, deadline, nested, throttled). The
// delay gauge is fed by WatchAdaptive.
//
// The attempts outcome label takes retry.Outcome's values (success, error,
// permanent_error, timeout, canceled); the calls outcome label takes
// retry.Reason's values (success, attempts, budget, breaker, permanent,
// context, deadline, panic, advice, nested, overloaded, throttled).
// stormguard_retries_active counts a call from the end of its first
// attempt until it returns, so a call waiting for a retry (backoff,
// Retry-After) is counted; a call whose first attempt succeeded passes
// through it in the instant before it returns (a hedged one while its
// cancelled copies return). Every call adds and subtracts exactly once,
// whatever its attempts did, so it returns to zero however the call
// ends. stormguard_breaker_state is a StateSet:
// one series per state, 1 for the current one. A limiter or breaker that
// several operations share is exported once, under SharedPrefix and their
// names, joined to them by limiter_info and breaker_info (see
// WatchLimiter, WatchBreaker). Every series of an
// operation is created, at zero, the first time the operation is seen, so
// rate() and absent() behave from the start.
//
// A Collector is safe for concurrent use. Its observer methods do not
// allocate once an operation has been seen, and a nil *Collector does
// nothing.
type Collector struct {
	// Per-operation series live in opMetrics as plain atomics and are
	// exposed as constant metrics at scrape time: cheaper on the request
	// path than client_golang's vectors.
	attemptsDesc        *prometheus.Desc
	callsDesc           *prometheus.Desc
	durationDesc        *prometheus.Desc
	activeDesc          *prometheus.Desc
	budgetExhaustedDesc *prometheus.Desc
	budgetTokens        *prometheus.Desc
	breakerState        *prometheus.Desc

	throttleProbability  *prometheus.Desc
	throttleRejections   *prometheus.Desc
	adaptiveFillRate     *prometheus.Desc
	adaptiveMeasuredRate *prometheus.Desc
	adaptiveWaits        *prometheus.Desc
	adaptiveRefused      *prometheus.Desc
	hedgesDesc           *prometheus.Desc
	hedgesRefusedDesc    *prometheus.Desc
	hedgeWatch           hedgeWatches // hedge.go
	keyedW               keyedWatches // keyed.go
	keyedTopN            int
	keyedAll             bool
	admissionWatch       admissionWatches // admission.go

	transitions   *prometheus.CounterVec
	queueDropped  *prometheus.CounterVec
	queueRefused  *prometheus.CounterVec
	queueDepth    *prometheus.GaugeVec
	configReloads *prometheus.CounterVec
	configInfo    *prometheus.GaugeVec

	ops    *labels.Table[*opMetrics]    // operation name -> series
	queues *labels.Table[*queueMetrics] // queue name -> series

	limiterInfo *prometheus.Desc
	breakerInfo *prometheus.Desc

	mu      sync.Mutex
	seq     uint64 // counts watches, to order them
	budgets map[string]*budgetWatch
	// breakers by operation name, and the parts (one per breaker, however
	// many operations share it) that count its transitions
	breakers     map[string]*breakerWatch
	breakerParts map[any]*breakerPart
	// limiters by operation name, the counts of the limiters no longer
	// watched by label, and the label each shared limiter had when the
	// most operations shared it (see WatchLimiter)
	limiters      map[string]*limiterWatch
	limiterTotals map[string]*limiterTotals
	limiterWidest map[any]widest
}

// Label values of stormguard_attempts_total{attempt_kind}.
const (
	kindFirst = "first"
	kindRetry = "retry"
)

// Number of retry.Outcome and retry.Reason values known to this package.
// Values past them (from a newer core) are counted under "unknown".
const (
	numOutcomes = int(retry.OutcomeCanceled) + 1
	numReasons  = int(retry.ReasonThrottled) + 1
	unknown     = "unknown"
)

// opMetrics holds one operation's series.
type opMetrics struct {
	name            string
	attempts        [2][numOutcomes + 1]atomic.Uint64 // the last outcome is unknown
	calls           [numReasons + 1]atomic.Uint64     // the last reason is unknown
	duration        *durationHistogram
	active          atomic.Int64
	budgetExhausted atomic.Uint64
	hedges          hedgeMetrics
}

// New returns a Collector configured by cfg. It panics if cfg.Buckets are
// not finite and increasing, or cfg.ConstLabels are invalid, as
// client_golang does.
func New(cfg Config) *Collector {
	ns := cfg.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	buckets := cfg.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	maxOps := cfg.MaxOperations
	if maxOps <= 0 {
		maxOps = DefaultMaxOperations
	}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: ns, Name: name, Help: help, ConstLabels: cfg.ConstLabels}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, cfg.ConstLabels)
	}
	c := &Collector{
		attemptsDesc: desc("attempts_total",
			"Attempts made by stormguard calls, by kind (first or retry) and outcome.",
			"operation", "attempt_kind", "outcome"),
		callsDesc: desc("calls_total",
			"Calls that returned, by outcome: success or the reason the call gave up.",
			"operation", "outcome"),
		durationDesc: desc("call_duration_seconds",
			"Duration of whole calls, every attempt and wait included, in seconds.",
			"operation"),
		activeDesc: desc("retries_active",
			"Calls whose first attempt ended and that have not returned: waiting for a retry, running one, deciding to give up, or (hedged) waiting for cancelled copies.",
			"operation"),
		budgetExhaustedDesc: desc("retry_budget_exhausted_total",
			"Calls that stopped because the retry budget refused a retry.",
			"operation"),
		budgetTokens: desc("retry_budget_tokens",
			"Retries the retry budget would grant now (tokens), read at scrape time.",
			"operation"),
		breakerState: desc("breaker_state",
			"Circuit breaker state, read at scrape time, as a StateSet: 1 for the current state (closed, half-open or open), 0 for the others.",
			"operation", "state"),
		throttleProbability: desc("throttle_rejection_probability",
			"Probability with which the client-side throttler (SRE adaptive throttling) rejects an attempt now, read at scrape time.",
			"operation"),
		throttleRejections: desc("throttle_local_rejections_total",
			"Attempts the client-side throttler rejected locally, without sending them.",
			"operation"),
		adaptiveFillRate: desc("adaptive_fill_rate",
			"Send tokens per second of the AWS adaptive-mode rate limiter (CUBIC-driven), read at scrape time.",
			"operation"),
		adaptiveMeasuredRate: desc("adaptive_measured_rate",
			"Smoothed rate at which answers come back, per second, as the AWS adaptive-mode rate limiter measures it.",
			"operation"),
		adaptiveWaits: desc("adaptive_waits_total",
			"Attempts that waited for a send token of the AWS adaptive-mode rate limiter.",
			"operation"),
		adaptiveRefused: desc("adaptive_refused_total",
			"Attempts the AWS adaptive-mode rate limiter refused because the wait for a token would not end before their deadline.",
			"operation"),
		hedgesDesc: desc("hedges_total",
			"Hedged attempts: sent because no attempt answered within the hedge delay (started), that gave the call's result (won), cancelled because another attempt answered first (hedge_cancelled), and the attempts they hedged cancelled because a hedge answered first (first_cancelled).",
			"operation", "result"),
		hedgesRefusedDesc: desc("hedges_refused_total",
			"Hedges that were due but not sent, by reason (budget, breaker, attempts, deadline, nested, throttled); the attempts in flight went on.",
			"operation", "reason"),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts(opts("breaker_transitions_total",
			"Circuit breaker state changes, by previous and new state.")),
			[]string{"operation", "from", "to"}),
		queueDropped: prometheus.NewCounterVec(prometheus.CounterOpts(opts("queue_dropped_records_total",
			"Records a background retry queue dropped.")),
			[]string{"queue"}),
		queueRefused: prometheus.NewCounterVec(prometheus.CounterOpts(opts("queue_refused_total",
			"Tasks a background retry Scheduler refused because it had MaxPending tasks; the caller kept them.")),
			[]string{"queue"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("queue_depth",
			"Records waiting in a background retry queue.")),
			[]string{"queue"}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts(opts("config_reloads_total",
			"Policy files applied (result=\"success\") or rejected (result=\"failure\", the old policies serving on), and file watcher errors (result=\"watch_error\", a reload from disk follows).")),
			[]string{"result"}),
		configInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("config_info",
			"1 for the version (content hash) of the policy file in force; join on it to split metrics by policy version.")),
			[]string{"version"}),
		limiterInfo: desc("limiter_info",
			"1 for each operation and the label its client-side limiter is exported under: the operation's own, or for a limiter several operations share "+SharedPrefix+" and their names; join on it.",
			"operation", "limiter"),
		breakerInfo: desc("breaker_info",
			"1 for each operation and the label its circuit breaker's transitions are counted under: the operation's own, or for a breaker several operations share "+SharedPrefix+" and their names; join on it.",
			"operation", "breaker"),
		budgets:       make(map[string]*budgetWatch),
		breakers:      make(map[string]*breakerWatch),
		breakerParts:  make(map[any]*breakerPart),
		limiters:      make(map[string]*limiterWatch),
		limiterTotals: make(map[string]*limiterTotals),
		limiterWidest: make(map[any]widest),
	}
	c.hedgeWatch = newHedgeWatches(desc)
	c.keyedW = newKeyedWatches(desc)
	c.keyedTopN, c.keyedAll = max(cfg.KeyedTopN, 0), cfg.KeyedAllKeys
	if cfg.KeyedTopN == 0 {
		c.keyedTopN = DefaultKeyedTopN
	}
	c.admissionWatch = newAdmissionWatches(desc)
	bounds, upper := bucketBounds(buckets)
	c.ops = labels.New(maxOps, func(label string) *opMetrics {
		return &opMetrics{name: label, duration: newDurationHistogram(bounds, upper)}
	}, nil)
	c.queues = labels.New(maxOps, func(label string) *queueMetrics {
		return &queueMetrics{
			dropped: c.queueDropped.WithLabelValues(label),
			refused: c.queueRefused.WithLabelValues(label),
			depth:   c.queueDepth.WithLabelValues(label),
		}
	}, nil)
	for _, op := range cfg.Operations {
		c.ops.Get(op)
	}
	return c
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.attemptsDesc
	ch <- c.callsDesc
	ch <- c.durationDesc
	ch <- c.activeDesc
	ch <- c.budgetExhaustedDesc
	ch <- c.budgetTokens
	ch <- c.breakerState
	ch <- c.throttleProbability
	ch <- c.throttleRejections
	ch <- c.adaptiveFillRate
	ch <- c.adaptiveMeasuredRate
	ch <- c.adaptiveWaits
	ch <- c.adaptiveRefused
	ch <- c.hedgesDesc
	ch <- c.hedgesRefusedDesc
	ch <- c.hedgeWatch.desc
	c.keyedW.describe(ch)
	c.admissionWatch.describe(ch)
	ch <- c.limiterInfo
	ch <- c.breakerInfo
	c.transitions.Describe(ch)
	c.queueDropped.Describe(ch)
	c.queueRefused.Describe(ch)
	c.queueDepth.Describe(ch)
	c.configReloads.Describe(ch)
	c.configInfo.Describe(ch)
}

// Collect sends the current value of every series, reading watched budgets
// and breakers.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// Read the sources first and outside the lock: a breaker's State may
	// make a pending transition (open to half-open) and run its listeners,
	// whose counts must then be in this scrape; and user code must not run
	// under our mutex.
	c.mu.Lock()
	budgets := slices.Collect(maps.Values(c.budgets))
	breakers, binfo := c.breakerWatchesLocked()
	c.mu.Unlock()
	gauges := make([]prometheus.Metric, 0, len(budgets)+numStates*len(breakers)+len(binfo))
	for _, w := range budgets {
		gauges = append(gauges, prometheus.MustNewConstMetric(c.budgetTokens, prometheus.GaugeValue, w.src.Available(), w.op))
	}
	for pair := range binfo {
		gauges = append(gauges, prometheus.MustNewConstMetric(c.breakerInfo, prometheus.GaugeValue, 1, pair[0], pair[1]))
	}
	for _, w := range breakers {
		st := w.src.State()
		for s := range numStates {
			v := 0.0
			if breaker.State(s) == st {
				v = 1
			}
			gauges = append(gauges, prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, v, w.op, breaker.State(s).String()))
		}
		if int(st) >= numStates { // a state of a newer core
			gauges = append(gauges, prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, 1, w.op, st.String()))
		}
	}

	gauges = append(gauges, c.limiterMetrics()...)

	for _, m := range c.ops.Values() {
		c.collectOp(ch, m)
	}
	c.collectHedgeDelays(ch)
	c.collectKeyed(ch)
	c.collectAdmission(ch)
	c.transitions.Collect(ch)
	c.queueDropped.Collect(ch)
	c.queueRefused.Collect(ch)
	c.queueDepth.Collect(ch)
	c.configReloads.Collect(ch)
	c.configInfo.Collect(ch)
	for _, g := range gauges {
		ch <- g
	}
}

// collectOp sends one operation's series. Every known outcome and reason
// is sent, at zero too; "unknown" only once it has counted something.
func (c *Collector) collectOp(ch chan<- prometheus.Metric, m *opMetrics) {
	for k, kind := range [2]string{kindFirst, kindRetry} {
		for o := range numOutcomes + 1 {
			v := m.attempts[k][o].Load()
			outcome := unknown
			if o < numOutcomes {
				outcome = retry.Outcome(o).String()
			} else if v == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.attemptsDesc, prometheus.CounterValue, float64(v), m.name, kind, outcome)
		}
	}
	for r := range numReasons + 1 {
		v := m.calls[r].Load()
		reason := unknown
		if r < numReasons {
			reason = retry.Reason(r).String()
		} else if v == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.callsDesc, prometheus.CounterValue, float64(v), m.name, reason)
	}
	count, sum, buckets := m.duration.snapshot()
	ch <- prometheus.MustNewConstHistogram(c.durationDesc, count, sum, buckets, m.name)
	ch <- prometheus.MustNewConstMetric(c.activeDesc, prometheus.GaugeValue, float64(m.active.Load()), m.name)
	ch <- prometheus.MustNewConstMetric(c.budgetExhaustedDesc, prometheus.CounterValue, float64(m.budgetExhausted.Load()), m.name)
	c.collectHedges(ch, m)
}
