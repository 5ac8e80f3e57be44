package retry_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stormguard/stormguard/retry"
)

// factErr reports every fact, as an adapter's error would.
type factErr struct {
	status   int
	header   string
	throttle bool
	code     string
}

func (e factErr) Error() string       { return "fact" }
func (e factErr) HTTPStatusCode() int { return e.status }
func (e factErr) ResponseHeader(n string) string {
	return map[bool]string{true: e.header}[n == "X-Test"]
}
func (e factErr) Throttle() bool    { return e.throttle }
func (e factErr) ErrorCode() string { return e.code }

// statusOnly reports an HTTP status and nothing else.
type statusOnly int

func (s statusOnly) Error() string       { return "status" }
func (s statusOnly) HTTPStatusCode() int { return int(s) }

// TestFactsReadThroughWrapping: each reader finds the first error of the
// chain that reports its fact, through both forms of Unwrap, and says when
// none does; IsThrottle prefers a ThrottleReporter's verdict to the status.
func TestFactsReadThroughWrapping(t *testing.T) {
	f := factErr{status: 503, header: "7", throttle: true, code: "SlowDown"}
	err := fmt.Errorf("op: %w", errors.Join(errors.New("other"), f))
	if c, ok := retry.HTTPStatusCode(err); !ok || c != 503 {
		t.Errorf("HTTPStatusCode: %d %v", c, ok)
	}
	if h, ok := retry.ResponseHeader(err, "X-Test"); !ok || h != "7" {
		t.Errorf("ResponseHeader: %q %v", h, ok)
	}
	if c, ok := retry.ErrorCode(err); !ok || c != "SlowDown" {
		t.Errorf("ErrorCode: %q %v", c, ok)
	}
	if !retry.IsThrottle(err) {
		t.Error("IsThrottle: the ThrottleReporter said so")
	}
	if retry.IsThrottle(factErr{status: 429}) {
		t.Error("IsThrottle: a ThrottleReporter that says no decides, whatever its status")
	}
	if !retry.IsThrottle(fmt.Errorf("x: %w", statusOnly(429))) || retry.IsThrottle(statusOnly(503)) {
		t.Error("IsThrottle: a bare status 429 is a throttle, a 503 is not")
	}
	plain := errors.New("plain")
	if _, ok := retry.HTTPStatusCode(plain); ok {
		t.Error("HTTPStatusCode found a status in a plain error")
	}
	if _, ok := retry.ResponseHeader(plain, "X-Test"); ok {
		t.Error("ResponseHeader found a header in a plain error")
	}
	if _, ok := retry.ErrorCode(nil); ok || retry.IsThrottle(nil) {
		t.Error("nil reports no fact")
	}
}
