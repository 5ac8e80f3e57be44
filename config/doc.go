// Package config loads retry policies from a YAML (or JSON) file and serves
// them through handles that follow the file as it changes, so operators can
// tune retries during an incident without a redeploy — and a bad edit never
// takes retries away or crashes the process.
//
// # The file
//
//	policies:                      # named policies (required)
//	  payments:
//	    max_attempts: 4            # 0: no count limit
//	    max_elapsed: 10s           # whole-call allowance
//	    attempt_timeout: 2s
//	    min_attempt_time: 100ms    # stop when the deadline cannot hold wait + this
//	    max_retry_after: 20s       # cap on Retry-After / gRPC pushback
//	    backoff:
//	      strategy: full_jitter    # any name registered with backoff.Register
//	      base: 100ms
//	      max: 5s
//	      multiplier: 2            # exponential strategies
//	      step: 100ms              # linear
//	      jitter: full             # for constant, linear, exponential: none|full|equal|decorrelated|proportional
//	      factor: 0.2              # proportional jitter
//	    retry_on:                  # PolicySpec.HTTPClassifier and GRPCRetryable turn these into the adapters' classifiers
//	      http_status: [429, 502, 503, 504]
//	      grpc_codes: [UNAVAILABLE, RESOURCE_EXHAUSTED]
//	    budget:                    # one of three kinds
//	      kind: ratio              # preset grpc|aws_standard|ten_percent, max_tokens, initial_tokens,
//	      preset: ten_percent      #   refill, retry_cost, timeout_cost, failure_cost, threshold
//	      # kind: window           # window, percent (0,1], min_retries_per_second, buckets
//	      # kind: concurrency      # percent (0,1], min_concurrency
//	    breaker:                   # one of three kinds, plus open_timeout, max_open_timeout,
//	      kind: time_window        #   open_timeout_multiplier, open_jitter, max_probes, success_threshold
//	      window: 60s              # time_window: window, buckets, min_calls, failure_rate (0,1],
//	      min_calls: 20            #   slow_call_duration, slow_call_rate (0,1]
//	      failure_rate: 0.3        # count_window: calls, min_calls, failure_rate, slow_call_*
//	                               # consecutive: failures
//	operations:                    # operation name -> policy name
//	  charge-card: payments
//	default: payments              # for names not listed (default: a policy named "default")
//
// Durations are Go durations ("250ms", "1m30s"). Rates are fractions in
// (0, 1]. Unknown fields, fields of another kind, negative durations,
// out-of-range numbers, max below base, unknown strategies and undefined
// policies are rejected. Load reports every problem at once, each with
// file, line and field:
//
//	config: policies.yaml:12: policies.payments.backoff.max: "5x" is not a duration (use a number with a unit: 250ms, 2s, 1m)
//
// schema.json beside this file is a JSON Schema of the format for editors.
//
// # Serving and reloading
//
// A Registry turns a File into retry.Policy values. Callers ask it once for
// a Handle by operation name and call Handle.Policy for every call: one
// atomic load, no lock. Registry.Watch reloads the file when it changes
// (debounced; it survives rename-on-save and Kubernetes ConfigMap symlink
// swaps). An invalid file keeps the previous policies serving and is
// reported through Options.OnReload, the log, and a ReloadObserver (the
// Prometheus collector counts reloads and exports the version). Budgets and
// breakers whose settings did not change keep their state across a reload.
//
// Each file has a Version, the start of its SHA-256, reported on every
// reload so dashboards can split metrics by policy version.
package config
