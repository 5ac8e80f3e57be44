package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DistKind selects the shape of a Dist.
type DistKind uint8

// Distribution shapes.
const (
	DistConst     DistKind = iota // always A
	DistExp                       // exponential with mean A
	DistNormal                    // |Normal(A, B)|: folded at zero, as in the AWS model
	DistUniform                   // uniform on [A, B]
	DistLogNormal                 // log-normal with median A and shape Sigma
)

var distNames = [...]string{"const", "exp", "normal", "uniform", "lognormal"}

// Dist is a distribution of durations: network leg latencies and service
// times. The zero Dist is the constant 0.
type Dist struct {
	// Kind is the shape; it says what A, B and Sigma mean. A Kind past
	// DistLogNormal is read as DistConst.
	Kind DistKind
	// A is the constant (DistConst), the mean (DistExp, DistNormal), the
	// lower bound (DistUniform) or the median (DistLogNormal).
	A time.Duration
	// B is the standard deviation (DistNormal) or the upper bound
	// (DistUniform; one below A reads as A); other kinds ignore it.
	B time.Duration
	// Sigma is DistLogNormal's shape, the standard deviation of the
	// logarithm (0: always A); other kinds ignore it.
	Sigma float64
}

// Const returns the distribution that is always d.
func Const(d time.Duration) Dist { return Dist{Kind: DistConst, A: d} }

// Exp returns the exponential distribution with the given mean.
func Exp(mean time.Duration) Dist { return Dist{Kind: DistExp, A: mean} }

// Normal returns |Normal(mean, sd)|, the normal distribution folded at zero
// so that a duration is never negative.
func Normal(mean, sd time.Duration) Dist { return Dist{Kind: DistNormal, A: mean, B: sd} }

// Uniform returns the uniform distribution on [lo, hi].
func Uniform(lo, hi time.Duration) Dist { return Dist{Kind: DistUniform, A: lo, B: hi} }

// LogNormal returns the log-normal distribution with the given median and
// shape sigma (the standard deviation of the logarithm).
func LogNormal(median time.Duration, sigma float64) Dist {
	return Dist{Kind: DistLogNormal, A: median, Sigma: sigma}
}

// Sample draws one duration, at most 1000 hours, never negative for a
// Dist whose A and B are not (as ParseDist makes them).
func (d Dist) Sample(r *rand.Rand) time.Duration {
	switch d.Kind {
	case DistExp:
		return toDuration(r.ExpFloat64() * float64(d.A))
	case DistNormal:
		v := float64(d.A) + r.NormFloat64()*float64(d.B)
		return toDuration(math.Abs(v))
	case DistUniform:
		if d.B <= d.A {
			return d.A
		}
		return d.A + time.Duration(r.Int64N(int64(d.B-d.A)+1))
	case DistLogNormal:
		return toDuration(float64(d.A) * math.Exp(d.Sigma*r.NormFloat64()))
	default:
		return d.A
	}
}

// maxSample bounds a single draw: far beyond any scenario, and far from
// the overflow of time.Duration.
const maxSample = 1000 * time.Hour

func toDuration(ns float64) time.Duration {
	if !(ns < float64(maxSample)) { // also NaN
		return maxSample
	}
	return time.Duration(ns)
}

// Mean returns the distribution's mean. For the folded normal it is the
// mean of |X|.
func (d Dist) Mean() time.Duration {
	switch d.Kind {
	case DistNormal:
		mu, sd := float64(d.A), float64(d.B)
		if sd == 0 {
			return time.Duration(math.Abs(mu))
		}
		m := sd*math.Sqrt(2/math.Pi)*math.Exp(-mu*mu/(2*sd*sd)) + mu*math.Erf(mu/(sd*math.Sqrt2))
		return toDuration(m)
	case DistUniform:
		return d.A + (max(d.B, d.A)-d.A)/2
	case DistLogNormal:
		return toDuration(float64(d.A) * math.Exp(d.Sigma*d.Sigma/2))
	default:
		return d.A
	}
}

// String formats d in the syntax ParseDist reads.
func (d Dist) String() string {
	switch d.Kind {
	case DistExp:
		return "exp(" + d.A.String() + ")"
	case DistNormal:
		return "normal(" + d.A.String() + "," + d.B.String() + ")"
	case DistUniform:
		return "uniform(" + d.A.String() + "," + d.B.String() + ")"
	case DistLogNormal:
		return "lognormal(" + d.A.String() + "," + strconv.FormatFloat(d.Sigma, 'g', -1, 64) + ")"
	default:
		return d.A.String()
	}
}

// ErrDist is wrapped by every error ParseDist returns.
var ErrDist = errors.New("sim: invalid distribution")

// ParseDist reads a distribution written as a duration ("10ms", a
// constant) or as name(args): const(10ms), exp(10ms) (mean),
// normal(10ms,2ms) (mean, standard deviation; folded at zero),
// uniform(5ms,15ms), lognormal(10ms,0.5) (median, sigma). Durations must not
// be negative.
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open < 0 {
		d, err := parseNonNeg(s)
		if err != nil {
			return Dist{}, err
		}
		return Const(d), nil
	}
	if !strings.HasSuffix(s, ")") {
		return Dist{}, fmt.Errorf("%w: %q lacks a closing parenthesis", ErrDist, s)
	}
	name := strings.TrimSpace(s[:open])
	args := strings.Split(s[open+1:len(s)-1], ",")
	kind := slices.Index(distNames[:], name)
	if kind < 0 {
		return Dist{}, fmt.Errorf("%w: unknown distribution %q (want one of %s)", ErrDist, name, strings.Join(distNames[:], ", "))
	}
	want := 2
	if k := DistKind(kind); k == DistConst || k == DistExp {
		want = 1
	}
	if len(args) != want {
		return Dist{}, fmt.Errorf("%w: %s takes %d arguments, got %d", ErrDist, name, want, len(args))
	}
	a, err := parseNonNeg(args[0])
	if err != nil {
		return Dist{}, err
	}
	d := Dist{Kind: DistKind(kind), A: a}
	switch d.Kind {
	case DistNormal, DistUniform:
		if d.B, err = parseNonNeg(args[1]); err != nil {
			return Dist{}, err
		}
		if d.Kind == DistUniform && d.B < d.A {
			return Dist{}, fmt.Errorf("%w: uniform(%s,%s) has its bounds the wrong way round", ErrDist, d.A, d.B)
		}
	case DistLogNormal:
		sigma, err := strconv.ParseFloat(strings.TrimSpace(args[1]), 64)
		if err != nil || sigma < 0 || sigma > 10 || math.IsNaN(sigma) {
			return Dist{}, fmt.Errorf("%w: lognormal sigma %q must be a number in [0, 10]", ErrDist, args[1])
		}
		d.Sigma = sigma
	}
	return d, nil
}

// maxDuration bounds durations read from files: a day of virtual time is
// far beyond any scenario and keeps arithmetic clear of overflow.
const maxDuration = 24 * time.Hour

func parseNonNeg(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a duration", ErrDist, s)
	}
	if d < 0 || d > maxDuration {
		return 0, fmt.Errorf("%w: duration %s is out of range [0, %s]", ErrDist, d, maxDuration)
	}
	return d, nil
}
