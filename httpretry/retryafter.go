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
// It returns ok false for an empty, malformed or negative value and for an
// absurd one, a delay that time.Duration cannot hold (about 292 years, e.g.
// "1000000000000"): the caller then falls back to its computed backoff. A
// large but representable delay is returned as is; the retry policy caps
// it with MaxRetryAfter.
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
				return 0, false
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(s)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	switch {
	case d <= 0:
		return 0, true
	case d == math.MaxInt64: // Sub saturated: beyond what a Duration holds
		return 0, false
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
