package backoff

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestBuiltinNames(t *testing.T) {
	p := Params{Base: 10 * ms, Max: time.Second}
	want := map[string]Strategy{
		"constant":            Constant{Interval: 10 * ms},
		"linear":              Linear{Base: 10 * ms, Max: time.Second},
		"exponential":         Exponential{Base: 10 * ms, Max: time.Second},
		"full_jitter":         Exponential{Base: 10 * ms, Max: time.Second, Jitter: Full},
		"equal_jitter":        Exponential{Base: 10 * ms, Max: time.Second, Jitter: Equal},
		"decorrelated_jitter": Exponential{Base: 10 * ms, Max: time.Second, Jitter: Decorrelated},
		"proportional_jitter": Exponential{Base: 10 * ms, Max: time.Second, Jitter: Proportional},
	}
	for name, w := range want {
		s, err := New(name, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s != w {
			t.Errorf("%s = %#v, want %#v", name, s, w)
		}
	}
	s, _ := New("exponential", Params{Jitter: Equal})
	if s.(Exponential).Jitter != Equal {
		t.Error("plain exponential should take Params.Jitter")
	}
	names := strings.Join(Names(), ",")
	if !strings.Contains(names, "decorrelated_jitter") || !strings.Contains(names, "constant") {
		t.Errorf("Names() = %s", names)
	}
}

var registrations atomic.Int32

func TestRegisterUserStrategy(t *testing.T) {
	// A fresh name per run: the registry is process-wide and -count=N reruns.
	name := "test_fibonacci_" + strconv.Itoa(int(registrations.Add(1)))
	err := Register(name, func(p Params) (Strategy, error) {
		return Func(func(n int, _ time.Duration) time.Duration {
			a, b := p.Base, p.Base
			for i := 1; i < n; i++ {
				a, b = b, a+b
			}
			return min(a, p.Max)
		}), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(name, Params{Base: ms, Max: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Delay(6, 0); got != 8*ms {
		t.Fatalf("fib(6) = %v", got)
	}
	if err := Register(name, func(Params) (Strategy, error) { return Constant{}, nil }); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if err := Register("", nil); err == nil {
		t.Fatal("empty registration accepted")
	}
}

func TestNewRejectsBadParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		want string
	}{
		{"nope", Params{}, "no strategy named nope"},
		{"exponential", Params{Base: -1}, "negative"},
		{"exponential", Params{Base: time.Second, Max: ms}, "max is below base"},
		{"exponential", Params{Factor: 1.5}, "factor"},
		{"exponential", Params{Multiplier: -2}, "multiplier"},
	} {
		_, err := New(tc.name, tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "backoff: ") {
			t.Errorf("New(%q, %+v) = %v, want error containing %q", tc.name, tc.p, err, tc.want)
		}
	}
}
