package httpretry_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// BenchmarkTransport measures what the transport adds to a plain
// http.Transport for a GET answered 200 on loopback: /bare and /stormguard
// report ns/op and allocs/op each (allocations include the in-process
// server's); /ratio alternates bare and stormguard on one connection each
// and reports their time ratio (goal of issue #36: <= 1.03) and the
// difference in allocations and bytes per request, the server's parsing
// of the announced headers included; /ratio-silent does the same with
// WithoutAnnounce (goal: <= 1.01, no extra allocation); /ratio-noise
// compares two bare transports, to show the noise of the run.
func BenchmarkTransport(b *testing.B) {
	srv := newServer(b, func(w http.ResponseWriter, r *http.Request, _ int) {
		io.WriteString(w, "ok")
	})
	policy := &retry.Policy{MaxAttempts: 3}
	newPair := func(b *testing.B) (bare, sg http.RoundTripper) {
		return newBase(b), httpretry.New(newBase(b), policy)
	}
	req := get(b, srv.URL)
	do := func(b *testing.B, rt http.RoundTripper) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	b.Run("bare", func(b *testing.B) {
		rt, _ := newPair(b)
		do(b, rt)
		b.ReportAllocs()
		for b.Loop() {
			do(b, rt)
		}
	})
	b.Run("stormguard", func(b *testing.B) {
		_, rt := newPair(b)
		do(b, rt)
		b.ReportAllocs()
		for b.Loop() {
			do(b, rt)
		}
	})
	// Each iteration times one request of bare and one of stormguard
	// (announcing, the default, in /ratio; WithoutAnnounce in
	// /ratio-silent), alternating which goes first; the ratio of the
	// medians shrugs off the scheduling spikes of a shared machine.
	ratios := func(b *testing.B, sg http.RoundTripper) {
		bare := newBase(b)
		do(b, bare)
		do(b, sg)
		var tBare, tSG []time.Duration
		odd := false
		for b.Loop() {
			first, second := http.RoundTripper(bare), sg
			if odd {
				first, second = sg, bare
			}
			t0 := time.Now()
			do(b, first)
			t1 := time.Now()
			do(b, second)
			d1, d2 := t1.Sub(t0), time.Since(t1)
			if odd {
				d1, d2 = d2, d1
			}
			tBare = append(tBare, d1)
			tSG = append(tSG, d2)
			odd = !odd
		}
		b.ReportMetric(float64(median(tSG))/float64(median(tBare)), "time-ratio")
		aBare, bBare := allocsPerRun(func() { do(b, bare) })
		aSG, bSG := allocsPerRun(func() { do(b, sg) })
		b.ReportMetric(aSG-aBare, "extra-allocs/req")
		b.ReportMetric(bSG-bBare, "extra-B/req")
	}
	b.Run("ratio", func(b *testing.B) { ratios(b, httpretry.New(newBase(b), policy)) })
	b.Run("ratio-silent", func(b *testing.B) {
		ratios(b, httpretry.New(newBase(b), policy, httpretry.WithoutAnnounce()))
	})
	// Two bare transports: how far from 1 the machine's noise puts a ratio.
	b.Run("ratio-noise", func(b *testing.B) { ratios(b, newBase(b)) })
	// The allocations the layer headers cost on the wire: the same
	// transport, announcing and silent.
	b.Run("announce-allocs", func(b *testing.B) {
		loud := httpretry.New(newBase(b), policy)
		silent := httpretry.New(newBase(b), policy, httpretry.WithoutAnnounce())
		bare := newBase(b)
		do(b, loud)
		do(b, silent)
		do(b, bare)
		for b.Loop() {
			do(b, loud)
		}
		aBare := testing.AllocsPerRun(200, func() { do(b, bare) })
		b.ReportMetric(testing.AllocsPerRun(200, func() { do(b, silent) })-aBare, "silent-extra-allocs/req")
		b.ReportMetric(testing.AllocsPerRun(200, func() { do(b, loud) })-aBare, "announced-extra-allocs/req")
	})
}

// allocsPerRun returns the allocations and bytes allocated per call of f,
// over 1000 calls (the allocations rounded down), process-wide (an in-process server's included), with
// GOMAXPROCS 1 as testing.AllocsPerRun does.
func allocsPerRun(f func()) (allocs, bytes float64) {
	const n = 1000
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		f()
	}
	runtime.ReadMemStats(&m1)
	// Whole allocations, as testing.AllocsPerRun counts: the runtime's
	// own now and then do not count.
	return float64((m1.Mallocs - m0.Mallocs) / n), float64(m1.TotalAlloc-m0.TotalAlloc) / n
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkOverhead isolates the transport's own cost: the next
// RoundTripper returns a canned response without any I/O.
func BenchmarkOverhead(b *testing.B) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	req := get(b, "http://127.0.0.1/")
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := next.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stormguard", func(b *testing.B) {
		rt := httpretry.New(next, &retry.Policy{MaxAttempts: 3})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	// With the shared breaker and budget a production policy has.
	b.Run("guarded", func(b *testing.B) {
		rt := httpretry.New(next, &retry.Policy{
			MaxAttempts: 3,
			Breaker:     breaker.New(breaker.Config{}),
			Budget:      budget.NewRatio(budget.TenPercent()),
		})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The bound of a request that succeeds at once (issue #36): no allocation
// beyond the next RoundTripper's when the transport announces nothing
// (WithoutAnnounce), and with the layer headers announced (the default)
// three: the attempt's request copy (one: the announced values are
// prebuilt and shared, or kept in the copy's own allocation when they are
// not — a deadline, an attempt past 16), and its header map (two: net/http
// gives no way to add a header without a Header map of the request's own,
// and a map costs its header and its group). The bytes are those of Go
// 1.26's size classes: a 320-byte request (352 with a deadline's digits),
// a 48-byte map header and a 352-byte group of eight entries; a caller
// header of more than eight entries less three costs a bigger map.
func TestAllocationsOnSuccess(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	plain := get(t, "http://127.0.0.1/")
	headed := get(t, "http://127.0.0.1/")
	headed.Header.Set("Authorization", "Bearer x")
	headed.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	dl := headed.WithContext(ctx)
	for _, c := range []struct {
		name          string
		req           *http.Request
		opts          []httpretry.Option
		allocs, bytes float64
	}{
		{"silent", plain, []httpretry.Option{httpretry.WithoutAnnounce()}, 0, 0},
		{"silent with a deadline", dl, []httpretry.Option{httpretry.WithoutAnnounce()}, 0, 0},
		// The request copy with its own announced values (announced,
		// 384), the header map and its group of 8 slots.
		{"announced", plain, nil, 3, 384 + 48 + 352},
		{"announced with caller headers", headed, nil, 3, 384 + 48 + 352},
		{"announced with a deadline", dl, nil, 3, 384 + 48 + 352},
	} {
		rt := httpretry.New(next, &retry.Policy{MaxAttempts: 3}, c.opts...)
		allocs, bytes := allocsPerRun(func() {
			if _, err := rt.RoundTrip(c.req); err != nil {
				t.Fatal(err)
			}
		})
		// A few bytes of slack: the runtime allocates now and then.
		if allocs > c.allocs || (bytes > c.bytes+16 && !raceEnabled && testing.CoverMode() == "") {
			t.Errorf("%s: %.1f allocations and %.0f bytes per request, want at most %v and %v", c.name, allocs, bytes, c.allocs, c.bytes)
		}
	}
}

// BenchmarkAnnounce measures what announcing the layer headers costs an
// attempt: /silent sends the caller's request as it is, /announced adds
// Stormguard-Attempt, -Will-Retry and -Deadline-Ms; /timeout-* do the same
// for attempts that get a request copy of their own anyway (an
// AttemptTimeout and a deadline).
func BenchmarkAnnounce(b *testing.B) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	req := get(b, "http://127.0.0.1/")
	req.Header.Set("Authorization", "Bearer x")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	dreq := req.WithContext(ctx)
	for _, c := range []struct {
		name string
		p    *retry.Policy
		req  *http.Request
		opts []httpretry.Option
	}{
		{"silent", &retry.Policy{MaxAttempts: 3}, req, []httpretry.Option{httpretry.WithoutAnnounce()}},
		{"announced", &retry.Policy{MaxAttempts: 3}, req, nil},
		{"timeout-silent", &retry.Policy{MaxAttempts: 3, AttemptTimeout: time.Minute}, dreq, []httpretry.Option{httpretry.WithoutAnnounce()}},
		{"timeout-announced", &retry.Policy{MaxAttempts: 3, AttemptTimeout: time.Minute}, dreq, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			rt := httpretry.New(next, c.p, c.opts...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResult measures reading a call's Outcome: a response without a
// record (a first-attempt success, which costs RoundTrip no allocation)
// and one the budget stopped (the record costs that RoundTrip two
// allocations: the request copy and the context node holding it).
func BenchmarkResult(b *testing.B) {
	req := get(b, "http://127.0.0.1/")
	ok := &http.Response{StatusCode: 200, Body: http.NoBody}
	refused := &http.Response{StatusCode: 503, Body: http.NoBody}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return refused, nil })
	b.Run("none", func(b *testing.B) {
		ok.Request = req
		b.ReportAllocs()
		for b.Loop() {
			if _, found := httpretry.Result(ok); found {
				b.Fatal("record on a first-attempt success")
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		p := &retry.Policy{MaxAttempts: 3, Budget: &refusingBudget{}}
		resp, err := httpretry.New(next, p).RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if o, found := httpretry.Result(resp); !found || o.Reason != retry.ReasonBudget {
				b.Fatal(o, found)
			}
		}
	})
}
