package backoff

import (
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Params are the settings a named strategy is built from, as read from a
// configuration file. Each constructor uses the fields that apply to it;
// zero fields take the strategy's defaults.
type Params struct {
	// Base is Exponential's and Linear's Base and Constant's Interval.
	// Negative: refused by New. Zero: 100ms for the exponential and linear
	// names, no wait for "constant".
	Base time.Duration
	// Max is Exponential's and Linear's cap ("constant" ignores it).
	// Negative, or positive and below Base: refused by New. Zero: 10s.
	Max time.Duration
	// Step is Linear's increment per retry. Negative: refused by New.
	// Zero: Base.
	Step time.Duration
	// Multiplier is Exponential's growth factor. Negative: refused by the
	// exponential names. Zero: 2.
	Multiplier float64
	// Jitter is the mode for "exponential", "linear" and "constant"; the
	// *_jitter names fix their own mode and ignore it. Zero: None.
	Jitter Jitter
	// Factor is Proportional jitter's spread. Below 0 or above 1: refused
	// by New. Zero (or NaN): DefaultFactor (0.2).
	Factor float64
	// Rand is the jitter's random source. nil: math/rand/v2's global
	// generator.
	Rand rand.Source
}

// Factory builds a Strategy from Params. It should reject values it cannot
// use with an error rather than guess.
type Factory func(Params) (Strategy, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Built-in names. "exponential", "linear" and "constant" take their jitter
// from Params.Jitter; the *_jitter names are exponential with that mode.
func init() {
	builtin := map[string]Factory{
		"constant": func(p Params) (Strategy, error) {
			return Constant{Interval: p.Base, Jitter: p.Jitter, Factor: p.Factor, Rand: p.Rand}, nil
		},
		"linear": func(p Params) (Strategy, error) {
			return Linear{Base: p.Base, Step: p.Step, Max: p.Max, Jitter: p.Jitter, Factor: p.Factor, Rand: p.Rand}, nil
		},
		"exponential":         expFactory(None, false),
		"full_jitter":         expFactory(Full, true),
		"equal_jitter":        expFactory(Equal, true),
		"decorrelated_jitter": expFactory(Decorrelated, true),
		"proportional_jitter": expFactory(Proportional, true),
	}
	for name, f := range builtin {
		registry[name] = f
	}
}

func expFactory(mode Jitter, fixed bool) Factory {
	return func(p Params) (Strategy, error) {
		if p.Multiplier < 0 {
			return nil, errors.New("backoff: multiplier must not be negative")
		}
		j := p.Jitter
		if fixed {
			j = mode
		}
		return Exponential{Base: p.Base, Max: p.Max, Multiplier: p.Multiplier, Jitter: j, Factor: p.Factor, Rand: p.Rand}, nil
	}
}

// Register makes a strategy constructor available under name. It fails if
// the name is empty or already taken.
func Register(name string, f Factory) error {
	if name == "" || f == nil {
		return errors.New("backoff: Register needs a name and a factory")
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		return errors.New("backoff: strategy " + name + " is already registered")
	}
	registry[name] = f
	return nil
}

// Lookup returns the constructor registered under name.
func Lookup(name string) (Factory, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// New builds the strategy registered under name from p.
func New(name string, p Params) (Strategy, error) {
	f, ok := Lookup(name)
	if !ok {
		return nil, errors.New("backoff: no strategy named " + name)
	}
	if p.Base < 0 || p.Max < 0 || p.Step < 0 {
		return nil, errors.New("backoff: durations must not be negative")
	}
	if p.Max > 0 && p.Base > p.Max {
		return nil, errors.New("backoff: max is below base")
	}
	if p.Factor < 0 || p.Factor > 1 {
		return nil, errors.New("backoff: jitter factor must be in [0, 1]")
	}
	return f(p)
}

// Names returns the registered names, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
