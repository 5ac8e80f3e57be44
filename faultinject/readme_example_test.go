package faultinject_test

import (
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

// Example_readme is the package README's snippet, compiled so that it
// cannot drift (TestREADMESnippetsAreCompiled checks the README against
// it). It is not run: its outage starts 10 s in.
func Example_readme() {
	app := http.NotFoundHandler()
	in := faultinject.New(faultinject.Config{
		Seed: 42, // same seed + rules + request order = same faults
		Rules: faultinject.Rules{
			Latency: 50 * time.Millisecond, Jitter: 20 * time.Millisecond,
			Abort:        faultinject.AbortRule{Percent: 5, Status: 503, RetryAfter: 2 * time.Second},
			ResetPercent: 1, HangPercent: 0.5,
			Outages: []faultinject.Window{
				{Start: 10 * time.Second, End: 20 * time.Second, Action: faultinject.Abort, Status: 503},
			},
			OutageCycle: time.Minute, // the schedule repeats every minute
			Limit:       faultinject.Limit{Concurrency: 8, Queue: 16, RetryAfter: time.Second},
		},
	})
	defer in.Close()

	srv := httptest.NewServer(in.Handler(app))                             // server side: a middleware
	client := &http.Client{Transport: in.Transport(http.DefaultTransport)} // client side: a RoundTripper
	_, _ = srv, client
}
