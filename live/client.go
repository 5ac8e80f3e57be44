package live

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	"github.com/stormguard/stormguard/httpretry"
)

// fleet is one run's clients: a dispatcher starting calls on the schedule,
// and a goroutine per call.
type fleet struct {
	sc       *Scenario
	url      string
	rec      *recorder
	base     *http.Transport
	clients  []*http.Client // one (Shared) or one per client (PerClient)
	policies *policySet
	calls    sync.WaitGroup
	agents   *agents // with Scenario.Reports
}

func newFleet(sc *Scenario, url string, rec *recorder, policies *policySet, conns int) *fleet {
	f := &fleet{sc: sc, url: url, rec: rec, policies: policies}
	f.base = &http.Transport{
		Proxy:               nil, // loopback only: never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		// Requests and answers are a few hundred bytes: small buffers keep
		// a pool of hundreds of connections light.
		ReadBufferSize:  1 << 10,
		WriteBufferSize: 1 << 10,
	}
	wire := &wire{next: f.base, rec: rec}
	f.clients = make([]*http.Client, len(policies.policies))
	for i, p := range policies.policies {
		f.clients[i] = &http.Client{Transport: httpretry.New(wire, p, httpretry.WithRetry500())}
	}
	if sc.Reports != nil {
		f.agents = newAgents(f)
	}
	return f
}

// run starts the scheduled calls, each in its own goroutine, and returns
// when every call has ended. ctx bounds the whole run: when it ends, no
// call starts and the calls in flight are cancelled.
func (f *fleet) run(ctx context.Context, calls []arrival) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, a := range calls {
		if d := time.Until(f.rec.start.Add(a.At)); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		f.rec.started(a.At)
		if f.agents != nil {
			f.agents.offer(int(a.Client), int(a.Seq))
			continue
		}
		f.calls.Add(1)
		go func() {
			defer f.calls.Done()
			f.call(ctx, int(a.Client), int(a.Seq))
		}()
	}
	f.calls.Wait()
	if f.agents != nil {
		f.agents.close(ctx)
	}
	f.base.CloseIdleConnections()
}

// call makes one call of client i, and reissues it while it fails (see
// Scenario.Reissue).
func (f *fleet) call(ctx context.Context, i, seq int) {
	key := "c" + strconv.Itoa(i) + "-" + strconv.Itoa(seq)
	body := []byte(`{"client":` + strconv.Itoa(i) + `,"seq":` + strconv.Itoa(seq) + `}`)
	c := f.clients[min(i, len(f.clients)-1)]
	for try := 0; ; try++ {
		if f.once(ctx, c, key, body) || try >= f.sc.Reissue {
			return
		}
		if f.sc.ReissueDelay > 0 {
			t := time.NewTimer(f.sc.ReissueDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if ctx.Err() != nil || f.rec.since() >= f.sc.Duration {
			return
		}
		f.rec.reissues.Add(1)
	}
}

// once makes one call under the caller's deadline and reports whether it
// succeeded.
func (f *fleet) once(ctx context.Context, c *http.Client, key string, body []byte) bool {
	f.rec.callStarted()
	begin := time.Now()
	cctx, cancel := context.WithTimeout(ctx, f.sc.callTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		f.rec.callEnded(time.Since(begin), false)
		return false
	}
	req.Header.Set(KeyHeader, key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	ok := err == nil && resp.StatusCode/100 == 2
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
	}
	f.rec.callEnded(time.Since(begin), ok)
	return ok
}

// wire is the RoundTripper under httpretry: it sees every attempt as it
// is handed to the transport, and as it is written on a connection.
type wire struct {
	next http.RoundTripper
	rec  *recorder
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	n, _ := strconv.Atoi(r.Header.Get(AttemptHeader))
	retry := n > 1
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			w.rec.written(retry)
		}
	}}
	w.rec.attemptSent(retry)
	resp, err := w.next.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
	w.rec.attemptEnded(err == nil && resp.StatusCode/100 == 2)
	return resp, err
}

// CloseIdleConnections closes the idle connections of the transport.
func (w *wire) CloseIdleConnections() {
	if c, ok := w.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
