package retry

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"syscall"
)

// DefaultClassifier reports whether err is worth retrying. It is used when
// Policy.Classify is nil.
//
// Not retried: nil, errors marked Permanent, context.Canceled, DNS "no such
// host", certificate errors, and url errors for an unsupported scheme.
// Retried: attempt timeouts, context.DeadlineExceeded and any net.Error
// timeout, connection refused/reset/aborted, broken pipe, host and network
// unreachable, temporary DNS failures, errors implementing
// Temporary() bool that report true — and any other error, as an unknown
// error is taken for transient unless marked Permanent (the convention of
// most retry libraries). Write a Classify function to be stricter.
//
// The caller's own cancellation is handled by Do before classification and
// is never retried.
func DefaultClassifier(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	if errors.Is(err, ErrAttemptTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if IsTransientNetError(err) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTemporary || dns.IsTimeout
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return false
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil && ue.Err.Error() == "unsupported protocol scheme" {
		return false
	}
	return true
}

// IsTransientNetError reports whether err is a network failure that a new
// attempt may well not meet: a timeout, connection refused, reset or
// aborted, broken pipe, an unreachable host or network, or a temporary DNS
// failure. It looks through wrapping with errors.As, never at error strings.
func IsTransientNetError(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range transientErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && (dns.IsTemporary || dns.IsTimeout) {
		return true
	}
	var tmp interface{ Temporary() bool }
	if errors.As(err, &tmp) && tmp.Temporary() {
		return true
	}
	return false
}

var transientErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
	syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
	syscall.ENETDOWN, syscall.EHOSTDOWN,
}
