package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("downstream failed")

// newTest returns a breaker on a fake clock, without open-period jitter
// unless cfg asks for it.
func newTest(t testing.TB, cfg Config) (*Breaker, *clocktest.Fake) {
	t.Helper()
	fc := clocktest.NewFake()
	cfg.Clock = fc
	if cfg.OpenJitter == 0 {
		cfg.OpenJitter = -1
	}
	b := New(cfg)
	t.Cleanup(b.Close)
	return b, fc
}

// try makes one call through Allow and reports its result.
func try(t testing.TB, b *Breaker, err error) error {
	t.Helper()
	done, aerr := b.Allow()
	if aerr != nil {
		return aerr
	}
	done(err)
	return nil
}

// mustCall makes one call that the breaker must admit.
func mustCall(t testing.TB, b *Breaker, err error) {
	t.Helper()
	if aerr := try(t, b, err); aerr != nil {
		t.Fatalf("Allow refused a call in state %v: %v", b.State(), aerr)
	}
}

// timed makes one admitted call that takes d on the fake clock.
func timed(t testing.TB, b *Breaker, fc *clocktest.Fake, d time.Duration, err error) {
	t.Helper()
	done, aerr := b.Allow()
	if aerr != nil {
		t.Fatalf("Allow refused a call in state %v: %v", b.State(), aerr)
	}
	fc.Advance(d)
	done(err)
}

func wantState(t testing.TB, b *Breaker, want State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("state = %v, want %v", got, want)
	}
}

// recorder collects state changes.
type recorder struct{ got []string }

func (r *recorder) listen(from, to State) { r.got = append(r.got, from.String()+"->"+to.String()) }
