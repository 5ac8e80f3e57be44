package httpretry_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// swapSource is a retry.PolicySource whose policy is swapped atomically,
// as a config.Handle's is on reload.
type swapSource struct{ p atomic.Pointer[retry.Policy] }

func (s *swapSource) Policy() *retry.Policy { return s.p.Load() }

// Issue #25, blocker 1: a transport built once follows its policy source.
// The server answers 500 to every request. Policy A makes 2 attempts and
// classifies by default (500 is not retried: 1 attempt per call); policy B
// makes 4 attempts and, through PolicyClassifier in its Classify (as
// config builds from retry_on), retries 500 (4 attempts per call). With
// concurrent callers, and the source swapped while calls flow, every call
// runs under exactly one of the two policies: 1 or 4 attempts, never a
// mixture; in the quiet phases every call follows the policy in force.
func TestTransportFollowsPolicySource(t *testing.T) {
	run(t, func(t *testing.T, m mode) {
		srv := newModeServer(t, m, statuses(500))
		a := noWait(2)
		b := noWait(4)
		b.Classify = httpretry.PolicyClassifier(func(resp *http.Response, err error) bool {
			return resp != nil && resp.StatusCode == 500 || httpretry.DefaultClassifier(resp, err)
		})
		src := &swapSource{}
		src.p.Store(a)
		rt := httpretry.New(srv.base(t), src) // built once
		client := &http.Client{Transport: rt}

		// call makes one GET and returns its attempts (1 when no record).
		call := func(t *testing.T) int {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return 0
			}
			readAll(t, resp)
			if resp.StatusCode != 500 {
				t.Errorf("status %d, want 500", resp.StatusCode)
			}
			o, ok := httpretry.Result(resp)
			if !ok {
				t.Error("no Outcome on a 500")
				return 0
			}
			return o.Attempts
		}
		phase := func(t *testing.T, want int) {
			t.Helper()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if n := call(t); n != want {
						t.Errorf("%d attempts, want %d", n, want)
					}
				})
			}
			wg.Wait()
		}

		phase(t, 1)
		src.p.Store(b) // reload: 4 attempts, 500 retried
		phase(t, 4)
		src.p.Store(a) // and back
		phase(t, 1)

		// Swapped while calls flow: each call reads the source once.
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%2 == 0 {
					src.p.Store(b)
				} else {
					src.p.Store(a)
				}
			}
		})
		var calls sync.WaitGroup
		for range 4 {
			calls.Go(func() {
				for range 25 {
					if n := call(t); n != 1 && n != 4 {
						t.Errorf("%d attempts: a call mixed two policies", n)
					}
				}
			})
		}
		calls.Wait()
		close(stop)
		wg.Wait()
	})
}

// A nil source, a nil *Policy and a source giving nil are the zero Policy,
// not a panic. (The zero Policy's backoff runs on the real clock, so the
// call is answered 404, which is not retried.)
func TestNilPolicySource(t *testing.T) {
	srv := newServer(t, statuses(404))
	var nilPolicy *retry.Policy
	var nilSrc swapSource
	for name, src := range map[string]retry.PolicySource{"nil": nil, "nil *Policy": nilPolicy, "gives nil": &nilSrc} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
			resp, err := httpretry.New(newBase(t), src).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if o, ok := httpretry.Result(resp); !ok || o.Attempts != 1 || o.Reason != retry.ReasonPermanent {
				t.Errorf("Result = %+v, %v; want permanent after 1 attempt", o, ok)
			}
		})
	}
}
