// Package promretry exports stormguard's retries, budgets, breakers and
// queues as Prometheus metrics, with github.com/prometheus/client_golang.
//
// One Collector serves a whole program: register it once, set it as the
// Observer of every retry.Policy, and attach each shared budget and breaker
// under the operation name its policy uses:
//
//	metrics := promretry.New(promretry.Config{})
//	prometheus.MustRegister(metrics)
//
//	policy := &retry.Policy{
//		Operation: "inventory.get",
//		Budget:    bud,
//		Breaker:   brk,
//		Observer:  metrics, // or retry.Multi(metrics, tracer, logger)
//	}
//	metrics.WatchBudget("inventory.get", bud)
//	metrics.WatchBreaker("inventory.get", brk)
//
// WatchBudget, WatchBreaker and WatchLimiter take any retry.Budget,
// retry.Breaker and retry.Limiter and export what each can tell (a
// throttle.SRE's rejection probability and local rejections, a
// throttle.Adaptive's rates, waits and refusals). With policies from a
// file, pass the Collector as config.Options.Observer (alone or in a
// retry.Multi) and make no Watch calls: config reports every reload to it
// and watches each operation's budget, breaker and limiter under the
// operation's name, so they join the call
// metrics on the operation label.
//
// The Collector also implements hedge.Observer: as the Observer of the
// Policy a hedge.Hedger uses (alone or in a retry.Multi), it counts hedges
// started, won and cancelled, and the attempts they hedged cancelled, in
// stormguard_hedges_total{result} (started, won, hedge_cancelled,
// first_cancelled) and hedges refused in
// stormguard_hedges_refused_total{reason}; WatchAdaptive exports an
// Adaptive's current delay as stormguard_hedges_delay_seconds.
//
// WatchKeyed exports a group of parts per key (package keyed: breakers,
// budgets, limiters, hedge delays) without a series per key: its members,
// evictions and overflows, and for a breaker group or a group of hedge
// delays the top Config.KeyedTopN keys (default 10) plus key="other"
// (stormguard_breaker_open_keys, stormguard_hedges_key_delay_seconds) and
// the delay over every key (stormguard_hedges_group_delay_seconds{stat});
// Config.KeyedAllKeys gives every key its series. WatchAdmission exports
// a server-side admission.Limiter (stormguard_admission_*).
//
// The metric names and labels are a contract shared with the dashboards and
// alerting rules in the repository's ops/ folder and with the otelretry module;
// see Collector for the list. The retry ratio — retries per first attempt,
// the number to watch during an incident — is
//
//	sum(rate(stormguard_attempts_total{attempt_kind="retry"}[1m]))
//	  / sum(rate(stormguard_attempts_total{attempt_kind="first"}[1m]))
//
// Operation names become label values, so they must come from the program,
// not from requests; Config.MaxOperations caps them anyway.
//
// Cost: after an operation's first event, the observer methods do one
// lock-free map read and a few atomic additions, without allocating
// (see BenchmarkDoWithCollector). Budget tokens and breaker states are read
// at scrape time, not on the request path.
package promretry
