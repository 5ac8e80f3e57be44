package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// Span is a telemetry record, as an SDK would produce it.
type Span struct {
	Seq  int    `json:"seq"`
	Name string `json:"name"`
}

// A telemetry exporter: the application offers spans without ever
// blocking; a worker posts them as JSON batches to the collector through
// httpretry, which retries transient failures (here a 503 with
// Retry-After). A batch the collector rejects (400) is dropped and counted,
// never retried. If the collector stays down, the queue's ring buffer
// keeps only the newest spans and counts the rest as dropped.
func Example_telemetryExporter() {
	// The collector, on loopback. Its first answer is 503; it rejects any
	// batch holding a span without a name.
	var (
		mu   sync.Mutex
		seen []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []Span
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if len(seen) == 0 {
			seen = append(seen, key+": 503")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var seqs []int
		for _, s := range batch {
			if s.Name == "" {
				seen = append(seen, key+": 400")
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			seqs = append(seqs, s.Seq)
		}
		seen = append(seen, fmt.Sprint(key, ": accepted ", seqs))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer collector.Close()

	// HTTP-level retries: httpretry under its own policy. The
	// Idempotency-Key makes the POST safe to repeat.
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: httpretry.New(base, &retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Exponential{Base: time.Millisecond, Max: 20 * time.Millisecond, Jitter: backoff.Full},
	})}

	export := func(ctx context.Context, batch []*Span) error {
		body, err := json.Marshal(batch)
		if err != nil {
			return retry.Permanent(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, collector.URL+"/v1/traces", bytes.NewReader(body))
		if err != nil {
			return retry.Permanent(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprint("batch-", batch[0].Seq))
		resp, err := client.Do(req)
		if err != nil {
			return err // the collector is unreachable: retried by the queue
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		switch {
		case resp.StatusCode < 300:
			return nil
		case httpretry.RetryableStatus(resp.StatusCode):
			return fmt.Errorf("collector: %s", resp.Status)
		default:
			return retry.Permanent(fmt.Errorf("collector: %s", resp.Status))
		}
	}

	q := queue.New(queue.Config[*Span]{
		Name:     "traces",
		Capacity: 2048,
		MaxBatch: 3,
		Linger:   5 * time.Second, // a partial batch waits at most 5s (Close sends it at once)
		// One call per delivery: httpretry already retried inside it. A
		// batch that still fails goes back to the buffer and the queue
		// pauses for the policy's next backoff delay.
		Policy: &retry.Policy{MaxAttempts: 1},
	}, export)

	// The application: Offer never blocks.
	for i := 1; i <= 7; i++ {
		name := fmt.Sprint("GET /item/", i)
		if i == 5 {
			name = "" // malformed
		}
		q.Offer(&Span{Seq: i, Name: name})
	}

	// Shutdown: flush what can be sent within 5 seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	remaining, err := q.Close(ctx)

	mu.Lock()
	for _, line := range seen {
		fmt.Println(line)
	}
	mu.Unlock()
	s := q.Stats()
	fmt.Printf("offered %d, delivered %d, rejected %d, dropped for room %d, left %d (err %v)\n",
		s.Offered, s.Delivered, s.DroppedPermanent, s.DroppedFull, remaining, err)
	// Output:
	// batch-1: 503
	// batch-1: accepted [1 2 3]
	// batch-4: 400
	// batch-7: accepted [7]
	// offered 7, delivered 4, rejected 3, dropped for room 0, left 0 (err <nil>)
}
