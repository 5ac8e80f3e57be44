// Package config loads retry policies from a YAML (or JSON) file and serves
// them through handles that follow the file as it changes, so operators can
// tune retries during an incident without a redeploy — and a bad edit never
// takes retries away or crashes the process.
//
// # The file
//
//	policies:                      # named policies (required)
//	  payments:
//	    max_attempts: 4            # attempts in all; left out: 3 (retry.DefaultMaxAttempts); unlimited: no count limit
//	    max_elapsed: 10s           # whole-call allowance
//	    attempt_timeout: 2s
//	    min_attempt_time: 100ms    # stop when the deadline cannot hold wait + this
//	    max_retry_after: 20s       # cap on Retry-After / gRPC pushback; ignore: ignore server advice
//	    backoff:
//	      strategy: full_jitter    # any name registered with backoff.Register
//	      base: 100ms              # left out: 100ms (backoff.DefaultBase), constant included
//	      max: 5s
//	      multiplier: 2            # exponential strategies
//	      step: 100ms              # linear
//	      jitter: full             # for constant, linear, exponential: none|full|equal|decorrelated|proportional
//	      factor: 0.2              # proportional jitter
//	    retry_on:                  # PolicySpec.HTTPClassifier and GRPCRetryable turn these into the adapters' classifiers
//	      http_status: [429, 502, 503, 504]
//	      grpc_codes: [UNAVAILABLE, RESOURCE_EXHAUSTED]
//	    budget:                    # one of three kinds
//	      kind: ratio              # preset grpc|aws_standard_2026|aws_standard_legacy|aws_standard|ten_percent,
//	      preset: ten_percent      #   max_tokens, initial_tokens, start_empty, refill, retry_refill,
//	                               #   refund_retry_success, retry_cost, timeout_cost, failure_cost,
//	                               #   throttle_cost, threshold
//	      # kind: window           # window, ratio (0,1] or none, min_retries_per_second (0 or none: no floor), buckets
//	      # kind: concurrency      # ratio (0,1] or none, min_concurrency (0 or none: none)
//	    breaker:                   # one of three kinds, plus open_timeout, max_open_timeout,
//	      kind: time_window        #   open_timeout_multiplier, open_jitter, max_probes, success_threshold
//	      window: 60s              # time_window: window, buckets, min_calls, failure_ratio (0,1],
//	      min_calls: 20            #   slow_call_duration, slow_call_ratio (0,1]
//	      failure_ratio: 0.3       # count_window: calls, min_calls, failure_ratio, slow_call_*
//	                               # consecutive: failures
//	    nested: one_layer          # the layer rule, for calls made while serving a request whose
//	                               #   caller retries it (retry.Policy.Nested): one_layer (left out:
//	                               #   the same) makes one attempt and leaves retrying to that caller;
//	                               #   ignore retries as usual; {rule: budget, budget: {kind: ...}}
//	                               #   retries only while that budget (a spec as above) grants it;
//	                               #   the mapping form also takes mesh_retries: true, declaring that
//	                               #   the mesh in front retries (layer.WithMeshRetriesFrom(handle))
//	    limiter:                   # sheds attempts on the client before they are sent (Policy.Limiter)
//	      kind: sre                # sre: k, window, buckets, max_rejection, min_requests
//	      k: 2                     # aws_adaptive: beta, scale_constant, smoothing, min_fill_rate
//	      throttle_on: overload    # both kinds: aws|overload or a list; left out: aws for aws_adaptive, overload for sre
//	    hedge:                     # hedged requests (Handle.Hedger): another attempt after delay
//	      delay: 50ms              #   with no answer; positive (0 is refused); may be left out with adaptive
//	      max_hedges: 1            #   at most max_attempts - 1; left out: 1
//	      adaptive: {percentile: 0.95, window: 10s, floor: 5ms}  # also max, min_samples; {} for defaults
//	      non_fatal_codes: [UNAVAILABLE]  # gRPC: codes a hedged copy may fail with (A6 nonFatalStatusCodes);
//	                               #   left out: retry_on.grpc_codes; []: every code fatal
//	  s3:
//	    preset: aws_standard_2026  # a whole policy: aws_standard_2026|aws_standard_2026_dynamodb|aws_standard_legacy
//	operations:                    # operation name -> policy name
//	  charge-card: payments
//	default: payments              # for names not listed (default: a policy named "default")
//
// Durations are Go durations ("250ms", "1m30s"), at most MaxDuration
// (24h): a longer one (a hedge.delay of 2562047h, say) is refused with the
// field's name, so no sum of durations downstream can overflow. Shares are fractions in
// (0, 1] whose key says so: ratio, failure_ratio, slow_call_ratio (0.2 is
// 20%), like the Go fields budget.WindowConfig.Ratio and
// breaker.Window.FailureRatio. The keys of earlier versions (percent,
// failure_rate, slow_call_rate) are refused with their new name.
//
// Every setting of the Go API that is a value has a file form, its
// negative "none" values included (see Zero, none and left out). Function
// fields have none, since a file cannot hold code: retry.Policy.Classify
// (set Options.Classify, or use retry_on and a preset), Policy.Rand and
// breaker.Config.Rand (the packages' default sources), breaker.Config's
// ReadyToTrip, IsFailure, IsExcluded and OnStateChange (breakers built
// from a file take breaker.DefaultIsFailure and DefaultIsExcluded, and
// report transitions to the BreakerWatchers), and
// breaker.Config.Probe with ProbeOffset and ProbeTimeout, which apply only
// with a Probe; throttle.SREConfig.Rand likewise. Clocks are Options.Clock.
//
// max_attempts counts attempts, the first included, from 1 to 1000. A
// policy that leaves it out gets retry.DefaultMaxAttempts (3), so a missing
// setting never means "retry forever". No count limit must be spelled
// max_attempts: unlimited (retry.Unlimited); bound such a policy with
// max_elapsed or a budget. max_attempts: 0, which once meant no limit, is
// refused: the file must say which it means.
//
// # Zero, none and left out
//
// A setting left out takes the Go API's default. A setting written as 0
// means what it says, and is refused where it cannot, so that neither
// ever means "no protection" or "no backoff", nor more retries than
// written:
//
//   - min_retries_per_second: 0 (window budget) and min_concurrency: 0
//     (concurrency budget), like min_requests: 0 (sre limiter), are no
//     floor: the Go API's -1 (WindowConfig.MinRetriesPerSecond,
//     ConcurrencyConfig.MinConcurrency, SREConfig.MinRequests); none
//     spells the same for the two budgets. Left out: 10 per second, 3, 16.
//   - ratio: none (window and concurrency budgets) is no share of
//     requests, only the floor (Ratio -1); ratio: 0 is refused, pointing
//     to none. Left out: 0.2.
//   - initial_tokens: 0 (ratio budget) is a bucket that starts empty:
//     RatioConfig.StartEmpty, whose InitialTokens 0 would be a full
//     bucket. Beside start_empty: false it is refused.
//   - budget.window: 0 is refused, like every other window's 0 (left
//     out: 10s).
//   - open_timeout: 0 (breaker), max: 0 and step: 0 (backoff) are
//     refused, pointing to leaving the field out: the Go API reads a
//     zero there as its default (a 60s open period, a 10s cap, a step of
//     base), not as no wait.
//   - max_retry_after: ignore ignores server advice
//     (retry.Policy.MaxRetryAfter -1); 0, or leaving it out, is the
//     default cap, retry.DefaultMaxRetryAfter (30s). none is refused (no
//     cap, or no advice?), and so are negative durations.
//   - open_jitter: 0 is no jitter (breaker.Config.OpenJitter -1).
//   - A built-in backoff strategy without base waits backoff.DefaultBase
//     (100ms) first, constant included (backoff.Constant itself has no
//     default and would retry at once); base: 0 means the same for the
//     others, and for constant an explicit base: 0 asks for no wait.
//
// Negative numbers are refused where the file spells the value none or
// ignore.
//
// A file must define at least one policy: policies: {} is refused, since
// applying it would take every operation's budget and breaker away.
// Unknown fields, fields of another kind, negative durations, out-of-range
// numbers, max below base, unknown strategies and undefined policies are
// rejected. Load reports every problem at once, each with file, line and
// field:
//
//	config: policies.yaml:12: policies.payments.backoff.max: "5x" is not a duration (use a number with a unit: 250ms, 2s, 1m)
//	config: policies.yaml:31: policies.telemetry.budget.percent: renamed to ratio, a fraction from 0 to 1
//
// # Limiters
//
// A limiter sheds attempts on the client, first attempts included, before
// they cost the downstream anything (package throttle). kind: sre is the
// SRE book's adaptive throttling (throttle.SRE, fields of
// throttle.SREConfig: k, window, buckets, max_rejection, min_requests;
// min_requests: 0 means no floor, left out it is 16); kind: aws_adaptive is
// the AWS SDKs' adaptive-mode rate limiter (throttle.Adaptive, fields of
// throttle.AdaptiveConfig: beta, scale_constant, smoothing, min_fill_rate).
// throttle_on (both kinds; SREConfig.Overload, AdaptiveConfig.Throttled)
// names which errors are throttling answers: aws (awsretry.IsThrottle: the
// AWS throttling codes, such as an HTTP 400 ThrottlingException, and HTTP
// 429), overload (throttle.IsOverload: HTTP 429 and 503, OverloadReporter
// errors, the overload marker), or a list of both (either counts). Left
// out, aws_adaptive uses aws, so that it acts on the answers AWS sends,
// and sre uses overload. Other fields left out take the throttle package's
// defaults, and each block is
// checked by the config's Validate. The Registry builds the limiter on
// Options.Clock and keeps the instance, with its counts, across reloads
// while the settings are unchanged (like budgets); a reload that changes
// them starts a fresh one. A LimiterWatcher in Options.Observer (the
// Prometheus and OpenTelemetry adapters) exports each operation's limiter.
//
// # Hedging
//
// A policy's hedge block (HedgeSpec) hedges its calls with package hedge:
// after delay with no answer another attempt starts, up to max_hedges,
// and the first answer wins. Hedges are attempts of the policy: they count
// against max_attempts and spend from its budget like retries. adaptive
// (the fields of hedge.AdaptiveConfig: percentile in (0, 1], window,
// floor, max, min_samples; {} for the hedge package's defaults) makes the
// delay a percentile of recent latencies, delay being the delay until it
// has min_samples of them. Refused: a zero or negative delay (gRFC A6's
// hedgingDelay 0 sends every copy at once and doubles the load), a block
// with neither delay nor adaptive, max_hedges beyond max_attempts - 1 (or
// outside [1, 100]), a max below the floor, and hedge beside a limiter
// (hedge.Do does not hedge such a policy).
//
// For gRPC, non_fatal_codes are gRFC A6's nonFatalStatusCodes
// (grpcretry.WithNonFatalCodes): a hedged copy failing with one of them
// lets the other copies go on; any other code ends the call. Left out,
// the policy's retry_on.grpc_codes count (what would be retried does not
// end a hedged call); non_fatal_codes: [] makes every code fatal, as in
// A6. PolicySpec.GRPCNonFatalCodes gives the list for WithNonFatalCodes,
// and Handle.GRPCNonFatal answers per code under the policy in force.
//
// Handle.Hedger returns the *hedge.Hedger: its Policy is the Handle, so
// every reload of the policy reaches calls made through it; its Adaptive
// belongs to the handle (one per operation), built on Options.Clock and
// kept across reloads while its settings are unchanged. A policy without
// hedge gives a Hedger with MaxHedges hedge.NoHedges (no hedging).
//
// # AWS presets
//
// Budget presets (kind: ratio): aws_standard_2026 is the AWS SDKs' 2026
// standard-mode quota (awsretry.Standard2026), aws_standard_legacy the one
// before it (awsretry.StandardLegacy), and aws_standard keeps meaning the
// legacy quota, the name it had before 2026, so existing files do not
// change behaviour. There is no DynamoDB budget preset: DynamoDB's 2026
// rules have the same quota and differ only in attempts (4) and backoff
// base (25 ms).
//
// A policy's preset key names a whole policy: aws_standard_2026
// (awsretry.Rules: 3 attempts, the 2026 quota, the rules' backoff — 50 ms
// base, 1 s after throttling, 20 s cap, full jitter, x-amz-retry-after
// clamped, as a retry.ErrorBackoff — and awsretry.IsRetryable),
// aws_standard_2026_dynamodb (awsretry.Rules{DynamoDB: true}: 4 attempts,
// 25 ms base) and aws_standard_legacy (awsretry.LegacyRules). max_attempts,
// backoff and budget written beside a preset override its own;
// Options.Classify or retry_on.http_status override its classification.
// Hyphenated spellings (aws-2026) are refused with the name to write.
//
// # Per key
//
// A breaker, budget (or nested budget), limiter or hedge block with per:
// host or per: method is split per key (package keyed, KeySpec): the
// Registry builds a group with one member per key, each with the block's
// settings, and each call uses the member of its key, so one dead host
// opens only its own breaker and spends only its own budget:
//
//	breaker: {kind: consecutive, failures: 5, per: host, max_keys: 500, idle: 10m}
//	budget:  {kind: ratio, preset: ten_percent, per: host}
//	hedge:   {adaptive: {}, per: host}   # one adaptive delay per host
//
// max_keys (1 to 10,000,000; left out: 1,000) bounds the live keys, and
// idle (positive, at most MaxDuration; left out: 5m) is how long a key's
// member may go unused before it is removed; both apply only with per.
// A window breaker per key holds its whole window for each key from its
// first call, and the group builds a default and an overflow member
// besides: calls × (max_keys + 2) bytes for a count window, buckets
// (left out: 10) × 32 bytes × (max_keys + 2) for a time window, is at
// most MaxKeyedWindowBytes (1 GiB), and a block beyond it is refused,
// naming calls or buckets and max_keys.
// per: none, or leaving per out, is one part for every call. The keyed
// parts of one policy must have the same per (a call carries one key); a
// hedge per key needs adaptive. A shared part per key (shared: NAME with
// per) is a group of fleet-wide parts, one per key, from a store that is a
// KeyedSharedStore (see Fleet state).
//
// The key comes from the adapter. For HTTP, per: host is the request's
// scheme, host and port (httpretry.HostKey, the adapters' default), and
// per: method is its method, host and path without the query
// (HTTPMethodKey, "GET https://api.example.com:443/v1/charges"): give
// the adapter Handle.HTTPKey (httpretry.WithKey(h.HTTPKey),
// hedge.Transport{Key: h.HTTPKey}) and the key follows the file. For
// gRPC, per: host is the connection's target and per: method the full
// method name: grpcretry.WithKeyPer(h.KeyPer).
//
// Reloads keep keyed state like the rest: a group whose block is
// unchanged is kept whole; one whose max_keys or idle alone changed is
// rebuilt with the surviving keys' members, state and all; one whose
// member settings or per changed starts every key afresh (a host key is
// no method key). A breaker group the
// reload drops (its block changed or removed) is closed once the new
// policies are in force: its breakers are closed (their active probing
// stops) unless the new group took them over; a call in flight keeps
// using the breaker it has.
//
// # Fleet state
//
// A breaker block, or a budget block of kind ratio, with shared: NAME is
// built by Options.Shared[NAME], a SharedStore given in code (the
// connection is never in the file), so every process of the fleet shares
// its state: redisstore.Store is the Redis one. The part is named after
// its policy (NAME.nested for a nested budget). It is kept across reloads
// while its settings are unchanged; a reload that changes them builds a
// new part under the same name, which joins the fleet's state, and closes
// the old one. A file naming a store not in Options.Shared, or one whose
// store refuses the block, is refused with the field named. Registry.Close
// stops the shared parts.
//
// With per: host or per: method as well, the block is a group of shared
// parts, one per key, each shared by the fleet on its own (one dead host
// opens its breaker for every process, the other hosts stay closed),
// bounded by max_keys and idle: the store's KeyedSharedStore methods build
// it (redisstore.Store's KeyedBreakers and KeyedBudgets). A store that is
// not a KeyedSharedStore refuses such a block, naming its per. The group
// is kept whole across reloads while the block is unchanged; a change of
// its settings, max_keys or idle builds a new group, whose members join
// the per-key state the fleet keeps, and closes the old one.
//
// schema.json beside this file is a JSON Schema of the format for editors.
//
// # Serving and reloading
//
// A Registry turns a File into retry.Policy values. Callers ask it once for
// a Handle by operation name and call Handle.Policy for every call: one
// atomic load, no lock.
//
// Start in two synchronous steps. Open reads and applies the file and
// returns its error (and no Registry) when it is missing or invalid, so a
// process never serves calls before its policies are in force. Then
// Registry.Watch sets up the watch, reads the file once more (an edit made
// in between is not lost) and returns its own start error, or a Watcher
// that reloads the file when it changes (debounced) until Close:
//
//	reg, err := config.Open("/etc/app/policies.yaml", config.Options{Observer: metrics, Logger: slog.Default()})
//	if err != nil {
//		return err // a bad file stops start-up
//	}
//	w, err := reg.Watch("/etc/app/policies.yaml", config.WatchOptions{})
//	if err != nil {
//		return err // or serve on without reloads
//	}
//	defer w.Close()
//	h := reg.Policy("charge-card")       // keep the handle
//	err = retry.Run(ctx, h.Policy(), op) // one atomic load per call
//
// The watch survives rename-on-save, and follows symlinks: a path
// linked to a file in another directory (a shared mount), through a
// release "current" link, or through a Kubernetes ConfigMap's ..data link
// is reloaded when the target is edited in place and when a link is
// re-pointed. An invalid file keeps the previous policies serving and is
// reported through Options.OnReload, the log, and a ReloadObserver (the
// Prometheus collector counts reloads and exports the version). Budgets and
// breakers whose settings did not change keep their state across a reload.
//
// Only events of the policy file and of the links on its way count: a
// busy log beside it does not postpone a reload, and a burst of edits
// postpones it at most WatchOptions.MaxDelay. A watched directory that is
// deleted or made again is watched again once it is back (reported until
// then as a watch error matching ErrWatchLost), and a policy file that
// stays deleted is reported as a rejected reload until it is back.
//
// An operation in use — one a Handle was obtained for, or one the file in
// force lists under operations — must keep a policy: a file that lists it
// nowhere and has no default is refused, naming the operation, and the
// old policies keep serving.
//
// A Registry made with NewRegistry serves the zero Policy until Reload or
// Apply succeeds (and says so in the log when a handle is asked for): use
// it to apply a File built in code; for a file on disk, use Open. A File
// built in code is checked before anything is built from it, every
// problem at once as an *Error naming the field: a nil PolicySpec, a
// PolicySpec.Name other than its key (an empty Name is the key), an
// operation or default naming a policy the File does not hold, a
// backoff backoff.New refuses (an unknown strategy, a negative duration,
// max below base; Params without a Strategy, which would be ignored: an
// empty BackoffSpec is the preset's backoff, or retry.DefaultBackoff), a
// per other than host or method, or keyed parts of one policy with
// different pers, hedge Keys without Adaptive, per-key sizes keyed.Config refuses, a breaker, budget
// or limiter config its Validate refuses, a budget or limiter kind that
// is not one, shared on a budget not of kind ratio, throttle_on names
// that are not aws or overload (or an empty list), a keyed window beyond
// MaxKeyedWindowBytes, and an admission block that is nil, whose
// Algorithm is not one, or whose config its package refuses. Apply(nil)
// is refused likewise.
//
// A file is applied all or nothing: its budgets, breakers and limiters
// are built and handed to the watch hooks (Options.OnBudget, OnBreaker,
// OnLimiter and the observers' Watch* methods) before any handle serves
// them. If a hook panics, the file is not applied: the old policies keep
// serving under the old version, the reload is counted as rejected
// (ReloadResult "failure", an error matching ErrHookPanic), and the panic
// goes on to the caller of Reload or Apply; under Watch it is recovered
// and reported, and the watch goes on.
//
// Reloads are serialised: Reload (from Watch, a SIGHUP handler, or both)
// reads, applies and reports one file at a time, so the file read last is
// the one in force and the last report names it.
//
// Each report has a result, ReloadResult: "success" (a file applied),
// "failure" (a file unreadable or refused) or "watch_error" (the watcher
// failed, e.g. an event overflow; not a verdict on the file, and Watch
// reloads from disk after it): the label set for a reload counter such as
// stormguard_config_reloads_total{result}.
//
// Each file has a Version, the start of its SHA-256, reported on every
// reload so dashboards can split metrics by policy version.
package config
