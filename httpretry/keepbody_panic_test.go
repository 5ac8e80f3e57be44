package httpretry_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/httpretry"
)

// panicBody is a response body whose Read panics; it counts its Closes.
type panicBody struct{ closed atomic.Int32 }

func (b *panicBody) Read([]byte) (int, error) { panic("body read") }
func (b *panicBody) Close() error             { b.closed.Add(1); return nil }

// TestKeepBodyReadPanicClosesBody: a 503 about to be retried has its body
// read (keepBody) so that its connection goes back to the pool; a body
// whose Read panics is closed once, and the panic goes on, with and
// without a breaker.
func TestKeepBodyReadPanicClosesBody(t *testing.T) {
	for _, withBreaker := range []bool{false, true} {
		body := &panicBody{}
		next := roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: body}, nil
		})
		p := noWait(3)
		if withBreaker {
			p.Breaker = breaker.New(breaker.Config{})
		}
		rt := httpretry.New(next, p)
		func() {
			defer func() {
				if v := recover(); v != "body read" {
					t.Errorf("breaker %v: recovered %v, want the body's panic", withBreaker, v)
				}
			}()
			rt.RoundTrip(get(t, "http://127.0.0.1/"))
		}()
		if n := body.closed.Load(); n != 1 {
			t.Errorf("breaker %v: body closed %d times, want 1", withBreaker, n)
		}
	}
}
