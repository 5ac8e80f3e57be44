package layer_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/layer"
)

// A service whose concurrency follows its latency: Middleware reads the
// caller's deadline, Adaptive admits within the adaptive limit and sheds
// the rest with the overload answer.
func ExampleAdaptive() {
	l, err := admission.New(admission.Config{})
	if err != nil {
		panic(err)
	}
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "done") })
	srv := httptest.NewServer(layer.Middleware(layer.Adaptive(l, work)))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "limit:", l.Limit())
	// Output: 200 limit: 20
}
