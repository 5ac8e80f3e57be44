package httpretry_test

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/stormguard/stormguard/httpretry"
)

// For any request and any sequence of server answers: a request that may
// not be repeated reaches the server exactly once; one that may is sent
// until the first answer not worth retrying or until MaxAttempts; the
// caller gets the last answer; every attempt carries the identical body;
// the request body is closed exactly once.
func TestPropertyAttemptsAndBodies(t *testing.T) {
	var (
		mu     sync.Mutex
		script []int
		bodies [][]byte
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		code := script[min(len(bodies), len(script))-1]
		mu.Unlock()
		w.WriteHeader(code)
	})
	base := newBase(t)
	codes := []int{200, 201, 204, 400, 404, 409, 422, 500, 501, 408, 429, 502, 503, 504}
	methods := []string{"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "POST", "PATCH"}

	rapid.Check(t, func(rt *rapid.T) {
		method := rapid.SampledFrom(methods).Draw(rt, "method")
		keyed := rapid.Bool().Draw(rt, "keyed")
		seq := rapid.SliceOfN(rapid.SampledFrom(codes), 1, 6).Draw(rt, "statuses")
		maxAttempts := rapid.IntRange(1, 5).Draw(rt, "maxAttempts")
		withGetBody := rapid.Bool().Draw(rt, "getBody")
		payload := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(rt, "payload")
		if method == "HEAD" || method == "GET" || method == "OPTIONS" {
			payload = nil // keep bodies to methods that carry them
		}

		mu.Lock()
		script, bodies = seq, nil
		mu.Unlock()

		var body *countingBody
		var req *http.Request
		if withGetBody || len(payload) == 0 {
			req, _ = http.NewRequest(method, srv.URL, bytes.NewReader(payload))
		} else {
			body = &countingBody{Reader: bytes.NewReader(payload)}
			req, _ = http.NewRequest(method, srv.URL, body)
		}
		if keyed {
			req.Header.Set("Idempotency-Key", "k")
		}
		resp, err := httpretry.New(base, noWait(maxAttempts)).RoundTrip(req)
		if err != nil {
			rt.Fatalf("RoundTrip: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()

		repeatable := keyed || method != "POST" && method != "PATCH"
		want := 1
		if repeatable {
			for want < maxAttempts && httpretry.RetryableStatus(seq[min(want, len(seq))-1]) {
				want++
			}
		}
		mu.Lock()
		got := bodies
		mu.Unlock()
		if len(got) != want {
			rt.Fatalf("%d attempts, want %d", len(got), want)
		}
		if last := seq[min(want, len(seq))-1]; resp.StatusCode != last {
			rt.Fatalf("returned %d, want the last answer %d", resp.StatusCode, last)
		}
		for i, b := range got {
			if !bytes.Equal(b, payload) {
				rt.Fatalf("attempt %d sent %d bytes, want the %d-byte payload", i+1, len(b), len(payload))
			}
		}
		if body != nil {
			waitFor(t, func() bool { return body.closes.Load() >= 1 })
			if n := body.closes.Load(); n != 1 {
				rt.Fatalf("body closed %d times", n)
			}
		}
	})
}

// Concurrent RoundTrips through one Transport (run with -race).
func TestConcurrentUse(t *testing.T) {
	var perKey sync.Map // request key -> *atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		v, _ := perKey.LoadOrStore(r.URL.Query().Get("k"), new(atomic.Int32))
		if v.(*atomic.Int32).Add(1) < 3 {
			w.WriteHeader(503)
			io.WriteString(w, "busy")
			return
		}
		io.Copy(w, r.Body)
	})
	rt := httpretry.New(newBase(t), noWait(5), httpretry.WithAttemptHeader("X-Attempt"))
	const workers, perWorker = 8, 20
	var wg sync.WaitGroup
	errs := make(chan string, workers*perWorker)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				k := string(rune('a'+w)) + string(rune('A'+i))
				req, _ := http.NewRequest(http.MethodPut, srv.URL+"?k="+k, bytes.NewReader([]byte(k)))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					errs <- err.Error()
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != k {
					errs <- k + ": " + resp.Status + " " + string(b)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := srv.hits.Load(); n != workers*perWorker*3 {
		t.Errorf("%d requests, want %d", n, workers*perWorker*3)
	}
}
