// Command httpclient is a runnable tour of stormguard on real HTTP traffic:
// a loopback server that fails a third of its requests and then goes down
// for a while, and a client whose retries are jittered, budgeted and cut
// off by a circuit breaker. It prints what each phase cost the server.
//
//	go run ./examples/httpclient
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

func main() {
	// The downstream: a handler behind fault injection, on loopback.
	var served atomic.Int64
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	})
	faults := faultinject.New(faultinject.Config{Seed: 7})
	defer faults.Close()
	srv := httptest.NewServer(faults.Handler(app))
	defer srv.Close()

	// One policy per downstream, shared by every caller: jittered backoff,
	// a 10% retry budget and a breaker that opens after 5 failures in a row.
	var transitions []string
	brk := breaker.New(breaker.Config{
		ConsecutiveFailures: 5,
		OpenTimeout:         500 * time.Millisecond,
		OnStateChange: func(from, to breaker.State) {
			transitions = append(transitions, from.String()+"→"+to.String())
		},
	})
	policy := &retry.Policy{
		Operation:      "demo.get",
		MaxAttempts:    4,
		Backoff:        backoff.Exponential{Base: 5 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: backoff.Full},
		AttemptTimeout: time.Second,
		Budget:         budget.NewRatio(budget.TenPercent()),
		Breaker:        brk,
	}
	client := httpretry.NewClient(policy)

	phase := func(name string, calls int) {
		before := faults.Snapshot().Requests
		ok, failed, fastFail := 0, 0, 0
		for i := 0; i < calls; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err := client.Do(req)
			switch {
			case errors.Is(err, breaker.ErrOpen):
				fastFail++
			case err != nil:
				failed++
			default:
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok++
				} else {
					failed++
				}
			}
			cancel()
		}
		sent := faults.Snapshot().Requests - before
		fmt.Printf("%-34s %4d calls: %4d ok, %3d failed, %3d refused by the open breaker; server saw %4d requests (%.2f per call)\n",
			name, calls, ok, failed, fastFail, sent, float64(sent)/float64(calls))
	}

	phase("healthy", 200)

	must(faults.Update(faultinject.Rules{Abort: faultinject.AbortRule{Percent: 30, Status: 503}}))
	phase("30% of requests answer 503", 200)

	must(faults.Update(faultinject.Rules{Abort: faultinject.AbortRule{Percent: 100, Status: 503}}))
	phase("down: every request answers 503", 200)

	must(faults.Update(faultinject.Rules{}))
	time.Sleep(600 * time.Millisecond) // let the breaker's open period pass (a demo, not a test)
	phase("recovered", 200)

	fmt.Println("breaker transitions:", transitions)
	fmt.Println("handler executions:", served.Load())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
