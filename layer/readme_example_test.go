package layer_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// Example_readme is the README's snippet, compiled and run so that it
// cannot drift (TestREADMESnippetsAreCompiled): the pricing service is
// overloaded, and the quote service passes its answer up instead of
// retrying it.
func Example_readme() {
	pricing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		layer.Overload(w, 0)
	}))
	defer pricing.Close()
	pricingURL := pricing.URL
	policy := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	mux := http.NewServeMux()

	client := httpretry.NewClient(policy) // announces; reads the marker
	mux.Handle("/quote", layer.Middleware(layer.Limit(64, layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", pricingURL, nil)
		resp, err := client.Do(req) // one attempt while our caller retries
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if o, ok := httpretry.Result(resp); ok && errors.Is(o.Err, retry.ErrOverloaded) {
			return o.Err // pass "overloaded; don't retry" up
		}
		_, err = io.Copy(w, resp.Body)
		return err
	}))))

	quote := httptest.NewServer(mux)
	defer quote.Close()
	resp, err := httpretry.NewClient(policy).Get(quote.URL + "/quote")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	o, _ := httpretry.Result(resp)
	fmt.Println(resp.StatusCode, resp.Header.Get(layer.HeaderOverloaded), o.Reason, o.Attempts)
	// Output: 503 1 overloaded 1
}
