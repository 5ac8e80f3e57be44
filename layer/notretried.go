package layer

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// NotRetriedHere reports whether err says that a call made while serving a
// request gave up on a failure it would have retried, only because the
// layer rule (retry.Policy.Nested) leaves retrying to the inbound caller:
// err wraps retry.ErrNestedRetry — what retry.Do, httpretry and grpcretry
// give up with when the rule refuses a retry — and does not carry the
// overload marker (retry.IsOverloaded), which always wins.
//
// Such a failure must reach the caller as an answer it retries, since the
// caller is the layer that retries: otherwise the chain makes one attempt
// in all. HandlerFunc answers it with NotRetried (503 without the
// overload marker); a gRPC server answers it UNAVAILABLE without
// "don't retry" pushback. It is the one fact both sides share.
func NotRetriedHere(err error) bool {
	return errors.Is(err, retry.ErrNestedRetry) && !retry.IsOverloaded(err)
}

// NotRetried answers a request whose own call failed and was not retried
// here because the caller retries (NotRetriedHere): 503 Service
// Unavailable, which clients retry, WITHOUT Stormguard-Overloaded — so
// the caller retries it, and tells it apart from Overload's "don't
// retry". When err carries a server's advice (retry.RetryAfter, such as a
// downstream's Retry-After), the answer carries it as Retry-After, in
// whole seconds rounded up (saturating), so the caller waits as long as
// the downstream asked. A Content-Length already set is removed, as
// http.Error does. Call it before writing anything else to w.
func NotRetried(w http.ResponseWriter, err error) {
	h := w.Header()
	h.Del("Content-Length")
	if d, ok := retry.RetryAfter(err); ok && d > 0 {
		h.Set("Retry-After", retryAfterSeconds(d))
	} else {
		h.Del("Retry-After")
	}
	h.Del(HeaderOverloaded)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte("unavailable; not retried here, retry at the caller\n"))
}

// retryAfterSeconds formats d as delta-seconds rounded up, at least 1,
// without overflowing near math.MaxInt64.
func retryAfterSeconds(d time.Duration) string {
	secs := int64(d / time.Second)
	if d%time.Second != 0 {
		secs++
	}
	return strconv.FormatInt(max(secs, 1), 10)
}
