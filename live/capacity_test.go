package live

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// A capacity window's boundary holds for every request that reaches the
// server after it, even when the schedule's timer fires late (as it does
// on a loaded machine): TestRunFaultKinds saw all 10 workers busy in a
// window of 2 when the timer was a few milliseconds late.
func TestCapacityBoundaryHoldsWhenTheTimerIsLate(t *testing.T) {
	sc := &Scenario{
		Name:    "late-capacity",
		Clients: 1,
		Server: Server{
			Limit:   faultinject.Limit{Concurrency: 10, Queue: 50},
			Service: sim.Const(time.Hour), // held until the caller leaves
			Timeout: time.Hour,
		},
		Faults: []sim.Fault{{Kind: sim.FaultCapacity, Start: 0, End: time.Hour, Factor: 0.2}},
	}
	s, err := newServer(sc, 1)
	if err != nil {
		t.Fatal(err)
	}

	s.capLate = time.Hour // the timer never fires within the test
	start := time.Now()
	s.start(newRecorder(start, sim.DefaultBucket, time.Minute), 1, 10*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	var c faultinject.Counters
	for {
		c = s.in.Snapshot()
		if c.InFlight+c.Waiting == 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	s.stop(time.Now().Add(time.Second))
	http.DefaultClient.CloseIdleConnections()
	if c.InFlight+c.Waiting != 10 {
		t.Fatalf("%d in flight and %d waiting after 30 s, want all 10 requests at the injector", c.InFlight, c.Waiting)
	}
	if c.InFlight != 2 || c.PeakInFlight > 2 {
		t.Errorf("%d in flight (peak %d) in a window of 2 workers whose timer was late", c.InFlight, c.PeakInFlight)
	}
}
