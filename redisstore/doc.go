// Package redisstore shares a circuit breaker and a retry budget between
// all the processes of a fleet through Redis.
//
// A service that runs as hundreds of replicas, each with a private
// breaker.Breaker and budget.Ratio, lets the fleet as a whole retry
// hundreds of times more than one budget allows, and makes every replica
// rediscover a dead dependency on its own. A Breaker made by NewBreaker and
// a Budget made by NewBudget keep that state in Redis instead, and
// implement retry.Breaker and retry.Budget like the local ones, so a
// retry.Policy switches between them by configuration:
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	br, err := redisstore.NewBreaker(redisstore.BreakerConfig{Client: rdb, Name: "payments", Breaker: breaker.Config{...}})
//	bu, err := redisstore.NewBudget(redisstore.BudgetConfig{Client: rdb, Name: "payments", Ratio: budget.TenPercent()})
//	p := retry.Policy{Breaker: br, Budget: bu}
//
// Use the local breaker and budget for a single process, or where a fleet
// that over-retries is acceptable; use these when the downstream must be
// protected from the fleet's total, and Redis is already at hand.
//
// # No call waits on Redis
//
// Each Breaker and Budget runs one background goroutine (stopped by Close)
// that exchanges with Redis every RefreshInterval (250ms by default), in
// one Lua script call: it flushes what the process counted since the last
// exchange and reads back the shared state. Calls are decided on the
// process's cached copy: in the closed state Allow is one atomic load, and
// its done function one more load and one striped counter increment; they
// allocate nothing and take no lock (BenchmarkAllowClosed compares them
// with breaker.Breaker). With slow-call timing each call gets its own
// done record instead (two small allocations), so that calling a done
// twice can never end another call. In the open state a refusal is two
// atomic loads: on the real clock a timer marks the end of the cached
// open period, so a refusal reads no clock once the exchange that cached
// the period has set it (BenchmarkRefusedOpen).
// The only calls that reach Redis are the half-open breaker's: asking for
// a probe permit and reporting the probe's result, each bounded by Timeout.
//
// # Consistency of the breaker
//
// Transitions are made by Lua scripts, atomically, once for the fleet.
// The state each process acts on is eventually consistent:
//
//   - Outcomes seen by a process reach Redis at its next exchange: within
//     RefreshInterval, and within RefreshInterval/10 after a failure (a
//     failure brings the exchange forward). The process that trips the
//     breaker acts on it at once.
//   - A state change in Redis reaches every other process at its next
//     refresh, within RefreshInterval. From a failure to the whole fleet
//     refusing calls takes at most about 1.1 × RefreshInterval plus two
//     round trips; meanwhile processes still admit calls on their cached
//     closed state.
//   - Half-open probe permits are fleet-wide and exact: at most MaxProbes
//     calls in the whole fleet probe at once. A process refused a permit
//     refuses further calls without asking Redis until its next refresh. A
//     permit whose holder never reports (it crashed, or lost Redis) is
//     freed after ProbeLease, and a report after that is ignored. A
//     permit is given back at once when the Clock, Rand or a listener
//     panics after it was granted (as an excluded result), and a probe
//     whose report finds the Clock or Rand panicking is reported with
//     Redis's own time and a jitter draw of 0.5; the panic goes on.
//   - Redis counts durations in whole milliseconds: a ProbeLease or a
//     window bucket (Window.Duration / Window.Buckets) below 1ms is
//     refused, and a ProbeLease, bucket, KeyTTL or the rest of an open
//     period to restore that is not a whole number of milliseconds is
//     rounded up to the next one (open periods are passed exactly).
//   - Results of calls admitted before a state change (an earlier
//     generation) are ignored, in Go and in Redis.
//   - The consecutive-failures condition counts failures in a row across
//     the fleet, in the order the batches reach Redis: a success anywhere
//     ends the run. Each batch carries its leading, longest and trailing
//     runs of failures, so a run inside one batch (fail, fail, fail,
//     succeed) trips as a local breaker would, and a batch's leading run
//     continues the run other processes left in Redis. The time window (Window.Duration) sums every process's
//     outcomes per bucket, by the time of the flush; prefer it for large
//     fleets. Count windows, ReadyToTrip and active probes cannot run in
//     Redis and are rejected.
//   - Times come from Redis: every script that compares times reads
//     Redis's clock (TIME), so clock skew between the hosts of the fleet
//     moves no open period and frees no live probe permit. A process keeps
//     its own Clock only for durations (refresh intervals, slow calls) and
//     maps the end of an open period onto it. A Clock other than the real
//     one (a fake clock in tests) is anchored to Redis's clock at the first
//     exchange and then drives the scripts' time from there, so a constant
//     offset between it and Redis does not matter either.
//
// Each process makes one Redis call of a Breaker at a time, so its cache
// follows the order in which Redis executed them.
//
// # The fleet budget and its slack
//
// The Budget is budget.Ratio's token bucket, held in Redis. Record sums the
// deposits (Refill per successful first attempt, and so on) and failure
// costs locally, and the next exchange adds them to the bucket. Withdraw
// pays a retry from a lease: tokens the process has already taken from the
// bucket, LeaseTokens at a time (twice the retry cost by default), topped
// up at every exchange and soon after the lease runs dry. Tokens move from
// the bucket to leases to retries and are never created, so over the life
// of the fleet, exactly as for one budget.Ratio shared by every caller
// (TestBudgetConservesTokens checks it):
//
//	retries × RetryCost ≤ InitialTokens + Refill × successful first attempts
//	                      (+ RetryRefill and refunds for successful retries)
//
// The slack is in how fast the tokens can be spent. One shared bucket never
// holds more than MaxTokens; leased tokens are outside the bucket, so with N
// processes the fleet can spend at once, and over any period beyond its
// deposits,
//
//	MaxTokens + N × LeaseTokens
//
// tokens: for TenPercent (10 tokens, retry cost 1, lease 2) and 10
// processes, a burst of up to 30 retries instead of 10, where 10 private
// budgets would allow 100 (TestFleetBudgetStorm). Over a period with S
// successful first attempts, retries ≤ (MaxTokens + N × LeaseTokens +
// Refill × S) / RetryCost.
//
// Budgets whose retries cost nothing and that are gated on a threshold
// (gRPC A6 throttling: FailureCost with Threshold) have no lease: a retry
// is granted while the shared balance seen at the last exchange, plus the
// process's own unflushed deposits and costs, is above Threshold. Each
// process then keeps granting retries for up to one RefreshInterval after
// the shared balance falls to the threshold; that is the slack.
//
// Close gives an unused lease back.
//
// # Replays
//
// A script whose reply was lost may have run: go-redis runs a command
// again after a dropped connection (MaxRetries), and a timeout says
// nothing of whether Redis ran it. Every script is therefore idempotent.
// Each exchange of a Breaker or a Budget carries a number, increasing per
// process, and Redis remembers the last number it applied for the process
// (the ":seen:<process>" key): a replay changes nothing, and a budget
// replay returns the lease its first run granted. An exchange that failed
// is sent again, under its number, before anything newer, so its outcomes
// and deposits count exactly once whether or not the first run happened.
// A replayed probe claim finds its permit (permits are named per call) and
// is granted it again; a replayed probe report finds its permit gone and
// changes nothing.
//
// # When Redis is slow or down
//
// Every Redis call is bounded by Timeout (100ms by default), which needs a
// client made with ContextTimeoutEnabled (NewBreaker and NewBudget reject
// go-redis clients without it). When a call fails or times out the
// process falls back at once to local state: a breaker.Breaker made from
// BreakerConfig.Local (or the same breaker.Config), honouring an open
// period last seen in Redis until it ends (see below for a shared open
// or half-open state); a budget.Ratio made from
// BudgetConfig.Local (or the same RatioConfig), which is private, so the
// fleet may retry as much as N private budgets while Redis is down. Both
// are made afresh at every fallback, from the last shared state seen: the
// local breaker starts closed, and decides at once if the shared state
// seen was closed (for an open or half-open one, see below); the private
// budget with the tokens the process could spend then (its
// lease and the shared balance, at most the private MaxTokens), never
// where an earlier outage left them. A process that falls back from a
// shared open or half-open state does not start closed: once the open
// period ends it is half-open, as a breaker.Breaker would be, on the local
// breaker's rules (BreakerConfig.Local, or Breaker): at most MaxProbes
// calls in flight, SuccessThreshold successes close it (the fresh local
// breaker then decides), and a failed probe opens it again for
// OpenTimeout (jittered by OpenJitter, drawn from Breaker.Rand; not
// grown by the multiplier), then half-open again. Probes are judged as a shared probe is (IsExcluded,
// IsFailure, and a slow call fails when the slow-call rate can trip). The
// process keeps serving, logs one warning (Logger), calls OnDegraded, and
// counts the event in Stats: LinkStats.Degraded, RedisErrors, Fallbacks
// (for metrics such as a stormguard_redis_degraded gauge). The background
// loop keeps trying every RefreshInterval, and the first exchange that
// succeeds re-joins the shared state, logged and reported likewise. Until
// the first exchange after NewBreaker or NewBudget, calls are decided on
// local state too.
//
// Outcomes are kept from the moment a Breaker is made, and flushed at the
// next exchange that succeeds. Those of calls decided before the first
// exchange count in the shared state if it is closed, whatever its
// generation: a process restarting into an outage (a crash loop) thus
// opens the breaker for the fleet with its first calls. Those of calls
// decided while degraded count toward the shared state the process last
// saw, as any other result does: if it is still the current state (or
// Redis lost it and a new closed state stands in for it, see below) they
// count; if the fleet has moved on meanwhile (another process's probe
// closed the breaker) they are dropped, like the results of any earlier
// generation, so a degraded period's failures do not re-open a fleet that
// has already recovered. A trip of the local breaker follows the same
// rule: the next exchange opens the closed shared breaker it counts
// toward, and until it has, the exchange does not turn the process's open
// breaker back to closed.
//
// # When Redis loses the state
//
// A restart without persistence, FLUSHALL, eviction or a failover to a
// replica that had not received the last writes make Redis start again
// with a closed breaker and a full bucket while processes still act on
// the old state. The state hash and the bucket each carry an epoch, made
// with them; every script compares it with the epoch the process last
// saw. A process that saw the breaker open (or half-open) sets a new
// closed state back to what it saw, with the rest of its open period; its
// probe claims and reports change nothing until then. A process holding
// a lease of a lost bucket drops it and leases again from the new one,
// so the fleet never holds more than MaxTokens plus its deposits. The
// README's "Operating on Redis" says which maxmemory-policy values are
// safe and what each failure costs.
//
// # Keys
//
// Keys are "<Namespace>:{<Name>}:state", ":probes", ":window:<generation>:<bucket>"
// (breaker), ":budget" (budget) and ":seen:<process>" (the last exchange
// applied for each process), with Namespace "stormguard" by default.
// The braces are a Redis Cluster hash tag: all keys of one name live in
// one slot, as the scripts need. Every key is given a TTL at every write
// (KeyTTL, 24h by default; window buckets live one window), so the keys of
// a service that is gone expire.
//
// # Per key
//
// KeyedBreakers and KeyedBudgets are bounded groups (package keyed) of
// shared Breakers and Budgets, one per key: one dead host opens its own
// breaker for the whole fleet and spends its own bucket, and the other
// hosts go on. A member's keys carry the key inside the hash tag, so each
// key is one Redis Cluster slot: "<Namespace>:{<Name>:=<key>}:state" for a
// key of at most MaxVerbatimKey printable ASCII bytes without braces,
// "<Namespace>:{<Name>:#<hex>}:state" (32 hex digits of the key's SHA-256)
// for any other; the default member is the unkeyed part of Name, the
// overflow member "{<Name>:#overflow}". Since a Name (and a Namespace)
// holding a brace, ":=" or ":#" is refused, two different names and keys
// never share Redis keys. A member the group removes, and
// every member at Close, is closed off the caller's path.
// BreakerConfig.OnMemberStateChange and OnMemberDegraded (and
// BudgetConfig.OnMemberDegraded) hear which member moved (a Member: its
// key, or the overflow member). Each member exchanges with Redis on its
// own goroutine; with BreakerConfig.BatchRefresh (BudgetConfig's) a
// group refreshes all its members from one goroutine instead, in
// pipelined exchanges (KeyedBreakers.SyncAll, KeyedBudgets.SyncAll), one
// round trip per Redis node for up to MaxBatch members.
package redisstore
