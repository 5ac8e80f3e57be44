package layer_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// Example_readme is the README's snippet, compiled and run so that it
// cannot drift (TestREADMESnippetsAreCompiled). When the pricing service
// is overloaded, the quote service passes its answer up instead of
// retrying it, and nobody retries. When it is merely down (a plain 503),
// the quote service makes one attempt, because its caller retries, and
// answers with pricing's status (issue #31 item 26: the snippet used to
// answer 200 OK): the caller, the one layer that retries, makes its 4
// attempts.
func Example_readme() {
	policy := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	for _, answer := range []http.HandlerFunc{
		func(w http.ResponseWriter, r *http.Request) { layer.Overload(w, 0) },
		func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
	} {
		var pricingHits atomic.Int32
		pricing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pricingHits.Add(1)
			answer(w, r)
		}))
		pricingURL := pricing.URL
		mux := http.NewServeMux()

		client := httpretry.NewClient(policy) // announces; reads the marker
		mux.Handle("/quote", layer.Middleware(layer.Limit(64, layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			req, _ := http.NewRequestWithContext(r.Context(), "GET", pricingURL, nil)
			resp, err := client.Do(req) // one attempt while our caller retries
			if err != nil {
				return err // a 503 for our caller to retry, when that is why it was not retried here
			}
			defer resp.Body.Close()
			if o, ok := httpretry.Result(resp); ok && errors.Is(o.Err, retry.ErrOverloaded) {
				return o.Err // pass "overloaded; don't retry" up
			}
			if v := resp.Header.Get("Retry-After"); v != "" {
				w.Header().Set("Retry-After", v)
			}
			w.WriteHeader(resp.StatusCode) // pricing's status: a 503 stays a 503, which our caller retries
			_, err = io.Copy(w, resp.Body)
			return err
		}))))

		quote := httptest.NewServer(mux)
		resp, err := httpretry.NewClient(policy).Get(quote.URL + "/quote")
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		o, _ := httpretry.Result(resp)
		fmt.Printf("%d, marker %q: %s after %d attempt(s); pricing saw %d request(s)\n",
			resp.StatusCode, resp.Header.Get(layer.HeaderOverloaded), o.Reason, o.Attempts, pricingHits.Load())
		quote.Close()
		pricing.Close()
	}
	// Output:
	// 503, marker "1": overloaded after 1 attempt(s); pricing saw 1 request(s)
	// 503, marker "": attempts after 4 attempt(s); pricing saw 4 request(s)
}
