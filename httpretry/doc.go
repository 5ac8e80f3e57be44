// Package httpretry retries HTTP requests safely, as an http.RoundTripper
// under a retry.Policy.
//
//	client := &http.Client{Transport: httpretry.New(http.DefaultTransport, &policy)}
//	// or: client := httpretry.NewClient(&policy)
//
// The policy's backoff, attempt limit, AttemptTimeout, Budget, Breaker,
// MaxRetryAfter, Clock and Observer all apply; share one policy (and so one
// Budget and one Breaker) between every client of the same downstream. A
// zero MaxAttempts means retry.DefaultMaxAttempts (3 attempts in all);
// retrying without a count limit takes MaxAttempts: retry.Unlimited.
//
// # Policies that change
//
// New and NewClient take a retry.PolicySource: a *retry.Policy, or a
// *config.Handle whose policy follows a reloaded file. The transport asks
// the source once at the start of every request, so every setting of the
// next request follows a reload — attempts, backoff, timeouts, Budget,
// Breaker, Observer and the classifier, when it rides in the policy's
// Classify (PolicyClassifier turns an HTTP classifier into one; a
// classifier given with WithClassifier is fixed for the transport's life
// and takes precedence).
//
// # What is retried
//
// Only requests that are safe to repeat: GET, HEAD, OPTIONS, TRACE, PUT and
// DELETE, and any request carrying an Idempotency-Key header (see
// Idempotent; WithRetryable changes the rule). Every other request, a POST
// without a key for instance, is sent exactly once whatever the policy
// says, though still through the policy's Breaker, Budget and Observer (as a
// call limited to one attempt), so an open breaker fails it fast.
//
// Of those requests, an attempt is retried when the classifier in force
// says so — the function given to WithClassifier, else the policy's
// Classify (asked with a *StatusError for a status of 400 or above, or the
// transport error), else DefaultClassifier, which retries the statuses 408, 429, 502,
// 503 and 504 (500 with WithRetry500), and transport errors that speak of a
// transient failure — connection refused or reset, a connection closed by
// the server before the response (io.EOF, io.ErrUnexpectedEOF), network and
// attempt timeouts, temporary DNS failures. Never 400, 401, 403, 404, 409,
// 422 or 501, and never the caller's own cancellation or deadline.
//
// A failure is judged the same over HTTP/1.1 and HTTP/2: a stream reset by
// the server with INTERNAL_ERROR or CANCEL (an aborted handler) is the
// counterpart of a connection closed mid-request, and so is a connection
// closed after GOAWAY; both are retried for repeatable requests only. A
// request that never reached a server able to act on it — its stream
// refused with REFUSED_STREAM, or its connection refused at dial — is
// retried even when it may not be repeated, provided its body can be
// replayed (GetBody). See RetryableError for how net/http's unexported
// HTTP/2 errors are recognised without reading messages.
//
// # What the RoundTripper contract asks, and how it is kept
//
//   - The caller's request is never modified: an attempt that needs its own
//     context, body or header gets a shallow copy (Request.WithContext).
//     Every header of the original (Authorization, traceparent, tracestate,
//     ...) is sent on every attempt, with the layer headers added (see
//     below).
//   - The request body is closed exactly once. It is replayed through
//     Request.GetBody, which http.NewRequest sets for in-memory bodies. A
//     body without GetBody is read into memory, up to WithBodyLimit
//     (default 1 MiB); a larger one is streamed and the request sent once.
//   - When a response came back, RoundTrip returns it with a nil error. When
//     the policy stops on a retryable status (attempts, budget, breaker, a
//     Retry-After beyond MaxRetryAfter or one that the caller's deadline
//     cannot hold), the last response is returned with its body intact.
//     Result(resp) then tells why the policy stopped (retry.ReasonBudget,
//     ...), after how many attempts, and the *retry.Error it gave up with,
//     so that errors.Is(o.Err, retry.ErrBudgetExhausted) works over HTTP as
//     it does for retry.Do. The record rides on resp.Request (a shallow
//     copy of the caller's request whose context carries it), so it
//     survives an http.Client and the body's reading and wrapping; a
//     first-attempt success carries none and costs no allocation.
//   - When the caller's context ends — during a backoff wait, typically —
//     RoundTrip returns the context's error (the message names the last
//     status), as net/http does for a cancelled request, and closes the
//     response it held for the retry.
//   - Errors behave as net/http's: wrapped in a *url.Error by http.Client,
//     Timeout reports true for the caller's deadline and for attempt
//     timeouts, net.Error sees them, and errors.Is finds the context's
//     error, the retry sentinel (retry.ErrAttemptsExhausted, ...) and the
//     last attempt's error; errors.As finds the *retry.Error. A request
//     sent once returns the next RoundTripper's error unchanged (marked as
//     an attempt timeout when AttemptTimeout cut it).
//   - A protocol upgrade (101 Switching Protocols) works through the
//     transport: the response body stays the io.ReadWriteCloser that
//     net/http returns, AttemptTimeout or not.
//   - A panic in code an attempt runs (the next RoundTripper, a classifier,
//     GetBody) is reported to the breaker, budget and observer with
//     retry.(*Call).Panic — a half-open probe permit or a concurrency
//     slot is released, the call ends with retry.ReasonPanic — and goes on.
//     A panic in a callback outside an attempt (the WithRetryable rule, the
//     policy source, the request body's Read while it is buffered, an
//     Observer, Limiter, Budget or Backoff) goes on too, after the request
//     body, when no attempt sent it, and the response kept for a retry are
//     closed. A runtime.Goexit in any of them (t.FailNow in a test's
//     RoundTripper, say) releases the same, and the attempt's
//     AttemptTimeout timer, before the goroutine ends.
//
// # Retry at one layer: what each attempt announces
//
// Every attempt tells the server, in headers (names in Headers, defaults
// in the layer package), its number (Stormguard-Attempt: 1, 2, ...),
// whether a failure of it may be retried (Stormguard-Will-Retry: 1 when
// (*retry.Call).WillRetry says another attempt may follow — the attempt
// limit and the policy's layer rule — or when the inbound call being
// served comes from a caller that retries, so that the next tier leaves
// retrying to that caller too; else 0),
// and the milliseconds left before its end (Stormguard-Deadline-Ms: the
// request's deadline or AttemptTimeout, the earlier; only when there is
// one). A server using layer.Middleware then makes one attempt per call
// of its own while the caller retries (retry.NestedOneLayer), so a chain
// of services does not multiply retries; when such a call fails, the
// server answers 503 without the overload marker (layer.NotRetried),
// which this transport retries as any 503, so the one layer that retries
// does. WithHeaders renames or drops
// them; WithoutAnnounce sends none (for third parties). Announcing costs
// an attempt three allocations, 784 bytes: a request copy holding the
// values it announces, and the new header map net/http needs
// (BenchmarkAnnounce, TestAllocationsOnSuccess). No header map and no
// announced value is shared between requests: an *http.Transport hands
// the request to code of the user's (its Proxy, a protocol registered
// with RegisterProtocol, a TLSNextProto RoundTripper) that might write to
// it.
//
// A response of status 429 or 5xx carrying Stormguard-Overloaded: 1
// (layer.Overload sends it with 503 and Retry-After) says "overloaded;
// don't retry" (on any other status the marker is ignored): the attempt
// reports retry.Overloaded(*StatusError), which is never retried, counts
// against the breaker and not against the budget; Result gives
// retry.ReasonOverloaded and an Err matching retry.ErrOverloaded, which a
// handler returns for layer.Middleware to pass the marker up.
//
// # Retry-After
//
// On 429 and 503 a Retry-After header, in delta-seconds or any of the three
// HTTP-date formats (see ParseRetryAfter; dates are compared with the
// policy's clock), makes the next wait at least that long, plus up to a
// tenth of jitter kept below Policy.MaxRetryAfter (default 30s). A client
// never comes back sooner than the server asked: when the advice exceeds
// MaxRetryAfter the call stops and the response is returned at once, body
// intact and error nil, and the Observer's CallEnd carries
// retry.ReasonAdvice (and retry.ErrAdviceExceedsCap). Likewise, when the
// caller's deadline cannot hold the wait, the response is returned at once
// instead of waiting. A malformed or negative value is ignored and the
// computed backoff applies; a value beyond what time.Duration holds is
// clamped to the largest one, so the call stops (retry.ReasonAdvice)
// rather than come back sooner than asked.
//
// # Connections, timeouts and cancellation
//
// Before a retry, the failed response's body is read (at most 4 KiB) and
// closed, so that its connection returns to the pool; a small body is read
// as soon as the attempt is classified, so the connection is free during
// the wait. Policy.AttemptTimeout bounds each attempt until its response
// headers arrive (an attempt cut by it is retried, over HTTP/1.1 and
// HTTP/2 alike: the attempt's context ends with context.DeadlineExceeded
// and the cause retry.ErrAttemptTimeout); the body of the returned
// response is bounded by the request's context alone. The request's
// context reaches every attempt: when the caller gives up, the attempt in
// flight is cancelled and no further one starts.
//
// # What the policy sees
//
// Each attempt reports to the Breaker, Budget and Observer: nil for a
// success (2xx, 3xx, 1xx), a *StatusError for a retryable status or any 5xx,
// retry.Permanent(*StatusError) for other 4xx, or the transport error.
// Whether an outcome counts against the downstream's health is a separate
// question (retry.IsDownstreamFault, a breaker's default): StatusError
// implements retry.FaultReporter, so 5xx and 429 are faults and every
// other status is not — a 404, a 409, and a 408 even though it is
// retried. A breaker behind the transport opens for a server that answers
// 500 and stays closed for one that answers 404.
package httpretry
