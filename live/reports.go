package live

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// agents are a fleet's report queues (Scenario.Reports): one real
// queue.Queue per client, under that client's retry.Policy (shared by all
// clients, or its own with PerClient), delivering batches of reports
// through the fleet's transport. Every scheduled arrival offers one
// report; every delivery is a call.
type agents struct {
	f      *fleet
	client *http.Client
	qs     []*queue.Queue[int]
	state  []agentState
}

// agentState follows one agent's deliveries, from its queue's single
// worker goroutine only (read after Close).
type agentState struct {
	runs      int         // deliveries begun (first attempts)
	seen      map[int]int // report -> the delivery that first carried it
	delivered int64
	delayed   int64 // delivered by a later delivery than the first to carry them
}

// attemptKey carries a delivery attempt's number into deliver.
type attemptKey struct{}

// deliveryObserver counts each delivery as a call and hands deliver its
// attempt number.
type deliveryObserver struct{ rec *recorder }

func (o deliveryObserver) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	return context.WithValue(ctx, attemptKey{}, e.Attempt)
}
func (deliveryObserver) AttemptEnd(context.Context, retry.AttemptEnd)         {}
func (deliveryObserver) RetryScheduled(context.Context, retry.RetryScheduled) {}
func (o deliveryObserver) CallEnd(_ context.Context, e retry.CallEnd) {
	o.rec.callStarted()
	o.rec.callEnded(e.Duration, e.Err == nil)
}

func newAgents(f *fleet) *agents {
	a := &agents{f: f, client: &http.Client{Transport: &wire{next: f.base, rec: f.rec}}}
	rq := f.sc.Reports
	a.qs = make([]*queue.Queue[int], f.sc.Clients)
	a.state = make([]agentState, f.sc.Clients)
	for i := range a.qs {
		rp := *f.policies.policies[min(i, len(f.policies.policies)-1)] // budget and breaker stay shared
		rp.Observer = retry.Multi(rp.Observer, deliveryObserver{rec: f.rec})
		a.state[i].seen = map[int]int{}
		a.qs[i] = queue.New(queue.Config[int]{
			Capacity: rq.Capacity, MaxBatch: rq.MaxBatch, Linger: -1, Workers: 1,
			Overflow: queue.DropOldest, Policy: &rp, Clock: clock.Real,
		}, a.deliverer(i))
	}
	return a
}

// deliverer returns agent i's delivery: one POST carrying the batch.
func (a *agents) deliverer(i int) func(ctx context.Context, batch []int) error {
	st := &a.state[i]
	return func(ctx context.Context, batch []int) error {
		n, _ := ctx.Value(attemptKey{}).(int)
		if n <= 1 {
			st.runs++
			for _, seq := range batch {
				if _, ok := st.seen[seq]; !ok {
					st.seen[seq] = st.runs
				}
			}
		}
		var body bytes.Buffer
		fmt.Fprintf(&body, `{"client":%d,"reports":%d,"first":%d}`, i, len(batch), batch[0])
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.f.url, &body)
		if err != nil {
			return err
		}
		req.Header.Set(AttemptHeader, strconv.Itoa(max(n, 1)))
		req.Header.Set(KeyHeader, "c"+strconv.Itoa(i)+"-r"+strconv.Itoa(batch[0])+"-"+strconv.Itoa(len(batch)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("live: report delivery: %s", resp.Status)
		}
		for _, seq := range batch {
			if st.seen[seq] < st.runs {
				st.delayed++
			}
			delete(st.seen, seq)
		}
		st.delivered += int64(len(batch))
		return nil
	}
}

// offer hands client's report seq to its queue.
func (a *agents) offer(client, seq int) { a.qs[client].Offer(seq) }

// close stops every queue, letting each deliver what it can before ctx
// ends, and records the reports' fates.
func (a *agents) close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range a.qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = q.Close(ctx)
		}()
	}
	wg.Wait()
	var offered, delivered, delayed, dropped, pending int64
	for i, q := range a.qs {
		s := q.Stats()
		offered += int64(s.Offered)
		dropped += int64(s.DroppedFull + s.DroppedPermanent)
		pending += int64(s.Pending)
		delivered += a.state[i].delivered
		delayed += a.state[i].delayed
	}
	a.f.rec.setReports(offered, delivered, delayed, dropped, pending)
}
