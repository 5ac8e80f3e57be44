package layer_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/layer"
)

// Example_adaptive is the README's layer.Adaptive snippet, compiled and
// run (TestREADMESnippetsAreCompiled): a request admitted under the
// adaptive limit is served, and the slot is given back.
func Example_adaptive() {
	run := func() error {
		mux := http.NewServeMux()
		quoteHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "quote")
		})
		l, err := admission.New(admission.Config{}) // Gradient2, queue of 100, CoDel 5ms/100ms
		if err != nil {
			return err
		}
		mux.Handle("/quote", layer.Middleware(layer.Adaptive(l, quoteHandler)))

		srv := httptest.NewServer(mux)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/quote")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "in flight after:", l.InFlight())
		return nil
	}
	if err := run(); err != nil {
		fmt.Println(err)
	}
	// Output: 200 quote in flight after: 0
}
