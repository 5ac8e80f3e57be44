package httpretry

import "net/http"

// HTTPStatusCode returns the response's status code. It makes StatusError
// a retry.StatusReporter, so that the mechanisms (budget, throttle,
// awsretry's rules) read the status without importing this package.
func (e *StatusError) HTTPStatusCode() int { return e.StatusCode }

// ResponseHeader returns the first value of the response's header field
// name (http.Header.Get), or "" when there is none or no response. It
// makes StatusError a retry.HeaderReporter (awsretry reads
// x-amz-retry-after through it).
func (e *StatusError) ResponseHeader(name string) string {
	if e.Response == nil {
		return ""
	}
	return e.Response.Header.Get(name)
}

// Throttle reports whether the status is 429 (Too Many Requests): the
// server asked the client to slow down. It makes StatusError a
// retry.ThrottleReporter (budget.Ratio's ThrottleCost).
func (e *StatusError) Throttle() bool { return e.StatusCode == http.StatusTooManyRequests }

// Overload reports whether the status says the server refused the request
// for lack of capacity: 429 (Too Many Requests) or 503 (Service
// Unavailable). It makes StatusError a throttle.OverloadReporter, so that
// client-side throttling (throttle.SRE, throttle.Adaptive) counts it as a
// rejection.
func (e *StatusError) Overload() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusServiceUnavailable
}
