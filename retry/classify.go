package retry

import (
	"context"
	"crypto/x509"
	"net"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// DefaultClassifier reports whether err is worth retrying. It is used when
// Policy.Classify is nil.
//
// Not retried: nil, errors marked Permanent, context.Canceled, DNS "no such
// host" and certificate errors.
// Retried: attempt timeouts, context.DeadlineExceeded and any net.Error
// timeout, connection refused/reset/aborted, broken pipe, host and network
// unreachable, temporary DNS failures, errors implementing
// Temporary() bool that report true — and any other error, as an unknown
// error is taken for transient unless marked Permanent (the convention of
// most retry libraries). Write a Classify function to be stricter.
//
// The caller's own cancellation is handled by Do before classification and
// is never retried. DefaultClassifier inspects wrapped errors by type, never
// by message, and does not allocate.
func DefaultClassifier(err error) bool {
	if err == nil {
		return false
	}
	// One pass over the chain collects what each wrapped error says; the
	// verdict then follows the precedence above, as if the chain were
	// searched once per question.
	return scanChain(err).f.retryable()
}

// scanned is what one walk of an error chain finds (scanChain).
type scanned struct {
	f      classFlags
	adv    time.Duration // the first After advice of the chain, when hasAdv
	hasAdv bool
}

// scanChain walks err's chain once, collecting the classification flags
// of its errors (up to the first Permanent mark, which nothing outranks)
// and the first advice (After) it carries, as RetryAfter finds it.
func scanChain(err error) (s scanned) {
	// walk's loop, written out for a chain of single wraps (the common
	// case: no call of a visit function per error); a join goes on with
	// walk.
	for err != nil {
		if isPlainErr(err) {
			// An error of a type that says nothing but by its value
			// (errors.New's): what flagsOf would find, by comparisons
			// alone, and nothing wrapped.
			s.f |= plainFlags(err)
			return s
		}
		if s.scan(err) {
			return s
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, s.scan) {
					return s
				}
			}
			return s
		default:
			return s
		}
	}
	return s
}

// scan adds what e says to s, and reports whether the scan is over (e is
// marked Permanent, which nothing outranks).
func (s *scanned) scan(e error) bool {
	s.f |= flagsOf(e)
	if a, ok := e.(*afterError); ok && !s.hasAdv {
		s.adv, s.hasAdv = a.d, true
	}
	return s.f&flagPermanent != 0
}

// retryable is DefaultClassifier's verdict on a chain with flags f.
func (f classFlags) retryable() bool {
	switch {
	case f&flagPermanent != 0:
		return false
	case f&flagTimeout != 0:
		return true
	case f&flagCanceled != 0:
		return false
	case f&flagTransient != 0:
		return true
	}
	return f&flagFatal == 0
}

// classFlags are what DefaultClassifier learns from one error of a chain.
type classFlags uint8

const (
	flagPermanent classFlags = 1 << iota
	flagTimeout
	flagCanceled
	flagTransient
	flagFatal
)

// What DefaultClassifier asks of an error of a chain — is it a Permanent
// mark, a timeout, a network or certificate error, does it wrap another —
// costs a dozen of the runtime's type assertions, most of them hash probes.
// For an error of a type that implements none of the interfaces asked
// about and is none of the types (errors.New's *errorString, a sentinel
// type of one's own), every answer follows from comparing the value with
// context.DeadlineExceeded, ErrAttemptTimeout and context.Canceled
// (plainFlags). The first few error types met are remembered by their type
// word (the error interface's itab, never freed nor moved), as kinds.go
// remembers plain breakers and budgets, with the low bit set for a type
// that is not plain (an itab is aligned, so its low bit is 0): a later
// error of a plain one is judged with a few comparisons, and one of the
// others goes to flagsOf at once. Slots fill in order, each written once,
// so parallel callers only read them once they are full.
var errKinds [8]atomic.Uintptr

// isPlainErr reports whether e (not nil) is of a plain type (see
// errKinds).
func isPlainErr(e error) bool {
	w := typeWord(unsafe.Pointer(&e))
	for i := range errKinds {
		switch errKinds[i].Load() {
		case w:
			return true
		case w | 1:
			return false
		case 0:
			return isPlainErrSlow(e, w, i)
		}
	}
	return false // every slot taken by other types: flagsOf, as before errKinds
}

// isPlainErrSlow is isPlainErr for a type not remembered yet; slot i is
// the first empty slot seen.
func isPlainErrSlow(e error, w uintptr, i int) bool {
	plain := plainType(e)
	k := w
	if !plain {
		k |= 1
	}
	for ; i < len(errKinds); i++ {
		if errKinds[i].CompareAndSwap(0, k) || errKinds[i].Load() == k {
			break
		}
	}
	return plain
}

// plainType reports whether the type of e (not nil) is plain: none of the
// types, and implementing none of the interfaces, that flagsOf and
// scanChain ask about.
func plainType(e error) bool {
	switch e.(type) {
	case *permanentError, *attemptTimeoutError, *afterError, *PanicError,
		interface{ Is(error) bool }, interface{ Unwrap() error }, interface{ Unwrap() []error },
		syscall.Errno, *net.DNSError, net.Error, interface{ Temporary() bool },
		x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError,
		*x509.UnknownAuthorityError, *x509.HostnameError, *x509.CertificateInvalidError:
		return false
	}
	return true
}

// plainFlags is flagsOf(e) for an error of a plain type (isPlainErr).
func plainFlags(e error) classFlags {
	var f classFlags
	if e == context.DeadlineExceeded || e == ErrAttemptTimeout {
		f |= flagTimeout
	}
	if isCanceled(e) {
		f |= flagCanceled
	}
	return f
}

func flagsOf(e error) classFlags {
	var f classFlags
	if _, ok := e.(*permanentError); ok {
		f |= flagPermanent
	}
	if isTimeout(e) {
		f |= flagTimeout
	}
	if isCanceled(e) {
		f |= flagCanceled
	}
	if isTransientNet(e) {
		f |= flagTransient
	}
	if isFatal(e) {
		f |= flagFatal
	}
	return f
}

// IsTransientNetError reports whether err is a network failure that a new
// attempt may well not meet: a timeout, connection refused, reset or
// aborted, broken pipe, an unreachable host or network, or a temporary DNS
// failure. It looks through wrapping by type, never at error strings.
func IsTransientNetError(err error) bool {
	return walk(err, isTransientNet)
}

func isTimeout(e error) bool { return e == context.DeadlineExceeded || isTimeoutMarker(e) }

// isTimeoutMarker matches ErrAttemptTimeout itself or an error of Do's own
// attempt timer, as adapters with their own timers report them.
func isTimeoutMarker(e error) bool {
	switch x := e.(type) {
	case *attemptTimeoutError:
		return true
	case interface{ Is(error) bool }:
		return x.Is(ErrAttemptTimeout) // an adapter's own timeout error type
	}
	return e == ErrAttemptTimeout
}

func isTransientNet(e error) bool {
	switch x := e.(type) {
	case syscall.Errno:
		switch x {
		case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
			syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
			syscall.ENETDOWN:
			return true
		}
		return false
	case *net.DNSError:
		return x.IsTemporary || x.IsTimeout
	case net.Error:
		return x.Timeout()
	case interface{ Temporary() bool }:
		return x.Temporary()
	}
	return false
}

func isFatal(e error) bool {
	switch x := e.(type) {
	case *net.DNSError:
		return !x.IsTemporary && !x.IsTimeout
	case x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError,
		*x509.UnknownAuthorityError, *x509.HostnameError, *x509.CertificateInvalidError:
		return true
	}
	return false
}
