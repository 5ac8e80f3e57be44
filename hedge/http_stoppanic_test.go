package hedge_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// hdrStopClock is a fake clock whose AfterFunc timers panic with
// "stop" in Stop, once they have stopped.
type hdrStopClock struct{ *clocktest.Fake }

type hdrStopTimer struct{ clock.Timer }

func (t hdrStopTimer) Stop() bool {
	t.Timer.Stop()
	panic("stop")
}

func (c hdrStopClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return hdrStopTimer{c.Fake.AfterFunc(d, f)}
}

// With Policy.AttemptTimeout, a header timer whose Stop panics must not
// drop what the next RoundTripper returned: the response's body is
// closed (its connection is not leaked) and the copy's context is
// cancelled; when the next RoundTripper panicked itself, its panic goes
// on and the context is cancelled all the same. Before, a Stop that
// panicked after RoundTrip returned left the body open, and one that
// panicked after RoundTrip panicked skipped the cancel.
func TestTransportHeaderTimerStopPanicClosesBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rtPans bool
		want   any
	}{
		{"response", false, "stop"},
		{"next RoundTripper panics", true, "roundtrip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := hdrStopClock{clocktest.NewFake()}
			body := &closeBody{Reader: strings.NewReader("ok")}
			var sent atomic.Value
			tr := &hedge.Transport{
				Next: rtFunc(func(r *http.Request) (*http.Response, error) {
					sent.Store(r.Context())
					if tc.rtPans {
						panic("roundtrip")
					}
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: body}, nil
				}),
				Hedger: &hedge.Hedger{Policy: &retry.Policy{Clock: clk, AttemptTimeout: time.Second, MaxAttempts: 1}, MaxHedges: hedge.NoHedges},
			}
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://example.invalid/", nil)
			if r := roundTripPanics(tr, req); r != tc.want {
				t.Fatalf("RoundTrip panicked with %v, want %v", r, tc.want)
			}
			if !tc.rtPans && body.closed != 1 {
				t.Fatalf("response body closed %d times, want 1", body.closed)
			}
			ctx, _ := sent.Load().(context.Context)
			if ctx == nil || ctx.Err() == nil {
				t.Fatal("the copy's context was not cancelled")
			}
			if n := clk.Pending(); n != 0 {
				t.Fatalf("%d timers left armed", n)
			}
		})
	}
}
