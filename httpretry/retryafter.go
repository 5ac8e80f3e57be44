package httpretry

import (
	"math"
	"net/http"
	"time"
)

// maxDelaySeconds is the largest delta-seconds value a time.Duration holds.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3) and
// returns how long from now the server asks the client to wait.
//
// The value is either delta-seconds (a non-negative decimal integer) or an
// HTTP-date in any of the three formats http.ParseTime accepts, compared
// with now (pass the retry policy's clock's Now). Surrounding spaces and
// tabs are ignored. A date in the past yields (0, true).
//
// It returns ok false for an empty, malformed or negative value: the
// caller then falls back to its computed backoff. A delay longer than
// time.Duration holds (about 292 years, e.g. "1000000000000", or a date in
// the year 9999) is clamped to the largest Duration, not ignored: the
// server asked for the longest wait, and the retry policy, which caps
// advice with MaxRetryAfter, then stops instead of coming back sooner. A
// large but representable delay is returned as is.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	s := trimSpace(value)
	if s == "" {
		return 0, false
	}
	if isDigits(s) {
		var secs int64
		for i := 0; i < len(s); i++ {
			secs = secs*10 + int64(s[i]-'0')
			if secs > maxDelaySeconds {
				return math.MaxInt64, true // clamped: the rest are digits too
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(s)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now) // saturates at math.MaxInt64 for a date beyond a Duration
	if d <= 0 {
		return 0, true
	}
	return d, true
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
