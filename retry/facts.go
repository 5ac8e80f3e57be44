package retry

// The facts an adapter knows about a failed attempt reach the mechanisms
// (budget, throttle, the rules of awsretry) through the small interfaces
// below, which the adapters' errors implement: httpretry.StatusError
// implements StatusReporter, HeaderReporter, ThrottleReporter and
// throttle.OverloadReporter; grpcretry.AttemptError implements
// throttle.OverloadReporter; the AWS SDK's errors already implement
// StatusReporter (smithy-go's ResponseError) and CodeReporter (smithy-go's
// APIError). So the mechanisms import no adapter, and an adapter written
// elsewhere is understood as well as the ones in this repository.
//
// Each reader below asks the first error in the chain (both forms of
// Unwrap, in the order errors.Is searches) that implements the interface,
// and does not allocate.

// StatusReporter is implemented by errors that carry the HTTP status code
// of the answer that failed the attempt. The method has the name and form
// of smithy-go's (*http.ResponseError).HTTPStatusCode, so the AWS SDK's
// errors implement it as they are.
type StatusReporter interface {
	// HTTPStatusCode returns the status code of the answer (429, 503, …).
	// An error that got no answer should not implement the interface
	// (the package's HTTPStatusCode would report its 0 as the status).
	// It may be called from several goroutines at once, whenever the
	// error is inspected, so it must be safe for concurrent use and
	// quick; a panic in it ends a retry.Do call as a panicking callback
	// does, and goes on.
	HTTPStatusCode() int
}

// HTTPStatusCode returns the status code reported by the first error in
// err's chain that implements StatusReporter; ok is false when none does.
func HTTPStatusCode(err error) (code int, ok bool) {
	walk(err, func(e error) bool {
		if s, is := e.(StatusReporter); is {
			code, ok = s.HTTPStatusCode(), true
		}
		return ok
	})
	return code, ok
}

// HeaderReporter is implemented by errors that carry the header of the
// answer that failed the attempt. ResponseHeader returns the first value
// of the header field name (case-insensitive, as http.Header.Get reads
// it), or "" when there is none. Rules that read a server's advice from a
// header (awsretry's x-amz-retry-after) use it.
type HeaderReporter interface {
	// ResponseHeader returns the first value of the answer's header field
	// name, matched case-insensitively, or "" when the answer has none.
	// It may be called from several goroutines at once, whenever the
	// error is inspected, so it must be safe for concurrent use and
	// quick; a panic in it ends a retry.Do call as a panicking callback
	// does, and goes on.
	ResponseHeader(name string) string
}

// ResponseHeader returns the value of the header field name of the answer
// reported by the first error in err's chain that implements
// HeaderReporter; ok is false when no error does (an implementer with no
// such field returns "" with ok true).
func ResponseHeader(err error, name string) (value string, ok bool) {
	walk(err, func(e error) bool {
		if h, is := e.(HeaderReporter); is {
			value, ok = h.ResponseHeader(name), true
		}
		return ok
	})
	return value, ok
}

// ThrottleReporter is implemented by errors that know whether they are a
// throttling answer: the server asked the client to slow down (an HTTP
// 429, a service's throttling error code), rather than failing.
type ThrottleReporter interface {
	// Throttle reports whether the answer asked the client to slow down.
	// Its verdict is final for IsThrottle: false is "not a throttle" even
	// when the chain also reports status 429.
	// It may be called from several goroutines at once, whenever the
	// error is inspected, so it must be safe for concurrent use and
	// quick; a panic in it ends a retry.Do call as a panicking callback
	// does, and goes on.
	Throttle() bool
}

// IsThrottle reports whether err is a throttling answer, by the facts its
// chain reports: nil is not; otherwise the first error implementing
// ThrottleReporter decides; otherwise an HTTP status 429 (Too Many
// Requests, from a StatusReporter) is one, and anything else is not.
// budget.Ratio charges ThrottleCost after such failures unless its
// RatioConfig.Throttles says otherwise; awsretry.IsThrottle adds the AWS
// throttling error codes.
func IsThrottle(err error) bool {
	if err == nil {
		return false
	}
	found, verdict := false, false
	walk(err, func(e error) bool {
		if t, is := e.(ThrottleReporter); is {
			found, verdict = true, t.Throttle()
		}
		return found
	})
	if found {
		return verdict
	}
	code, ok := HTTPStatusCode(err)
	return ok && code == 429
}

// CodeReporter is implemented by errors that carry a service's error code
// ("ThrottlingException", "RequestTimeout", …). The method has the name
// and form of smithy-go's APIError.ErrorCode, so the AWS SDK's API errors
// implement it as they are.
type CodeReporter interface {
	// ErrorCode returns the service's error code, as the service spells
	// it; "" when the answer carried none (ErrorCode then reports "" with
	// ok true).
	// It may be called from several goroutines at once, whenever the
	// error is inspected, so it must be safe for concurrent use and
	// quick; a panic in it ends a retry.Do call as a panicking callback
	// does, and goes on.
	ErrorCode() string
}

// ErrorCode returns the code reported by the first error in err's chain
// that implements CodeReporter; ok is false when none does.
func ErrorCode(err error) (code string, ok bool) {
	walk(err, func(e error) bool {
		if c, is := e.(CodeReporter); is {
			code, ok = c.ErrorCode(), true
		}
		return ok
	})
	return code, ok
}
