package layer

// The wire names of the layer rule over HTTP. httpretry sends the first
// three on every attempt (its Headers option renames or drops them) and
// reads HeaderOverloaded on every response; Middleware reads them, and
// Envoy's, on every request, and Overload writes HeaderOverloaded.
const (
	// HeaderAttempt carries the caller's attempt number: "1" for its first
	// attempt, "2" for its first retry, ...
	HeaderAttempt = "Stormguard-Attempt"
	// HeaderWillRetry is "1" when the caller may retry this request itself
	// if it fails, "0" when it will not.
	HeaderWillRetry = "Stormguard-Will-Retry"
	// HeaderDeadline carries the milliseconds left before the caller gives
	// up on this attempt.
	HeaderDeadline = "Stormguard-Deadline-Ms"
	// HeaderOverloaded, set to "1" on a response (with 503 and
	// Retry-After), says "overloaded; don't retry": no layer retries it,
	// and a service that meets it passes it up on its own response. It
	// counts only on a 429 or 5xx; httpretry ignores it on any other
	// status.
	HeaderOverloaded = "Stormguard-Overloaded"

	// EnvoyAttemptCount is Envoy's attempt number for the request
	// (x-envoy-attempt-count), read when HeaderAttempt is absent.
	EnvoyAttemptCount = "X-Envoy-Attempt-Count"
	// EnvoyExpectedTimeout is the time Envoy will wait for the request, in
	// milliseconds (x-envoy-expected-rq-timeout-ms), read when
	// HeaderDeadline is absent.
	EnvoyExpectedTimeout = "X-Envoy-Expected-Rq-Timeout-Ms"
)
