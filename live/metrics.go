package live

import (
	"slices"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// EntryTolerance is how far above its baseline entry traffic must be, on
// average after errors begin, to count as rising (Entry.Rising).
const EntryTolerance = 0.10

// Extra holds what a live run measures beyond sim.Metrics.
type Extra struct {
	// Accounting. ClientAttempts are the attempts httpretry handed to the
	// clients' transport; ClientSent those written on a connection (an
	// attempt may end before that, waiting for a connection of the pool);
	// ServerAttempts those the server received. Once a run has drained,
	// ClientSent equals ServerAttempts. The Retries fields count those
	// whose attempt header is above 1.
	ClientAttempts int64 `json:"client_attempts"`
	ClientRetries  int64 `json:"client_retries"`
	ClientSent     int64 `json:"client_sent"`
	SentRetries    int64 `json:"sent_retries"`
	ServerAttempts int64 `json:"server_attempts"`
	ServerRetries  int64 `json:"server_retries"`
	// Lost counts requests a loss fault left unanswered (the server never
	// worked on them); RepliesLost the answers a reply-loss fault lost
	// after the work was done.
	Lost        int64 `json:"lost"`
	RepliesLost int64 `json:"replies_lost,omitempty"`
	// Reissues counts calls issued again by their caller after failing
	// (Scenario.Reissue); each also counts in Metrics.Calls.
	Reissues int64 `json:"reissues"`
	// ServerErrors counts executions answered 500 (Server.FailProb or an
	// errors fault).
	ServerErrors int64 `json:"server_errors"`

	// StartLagMeanMS and StartLagMaxMS say how late, on average and at
	// worst, the clients started their calls against their schedule: a
	// measure of the harness itself. Lags of many milliseconds mean the
	// machine could not keep up, and the load it measured is not the load
	// the scenario asked for.
	StartLagMeanMS float64 `json:"start_lag_mean_ms"`
	StartLagMaxMS  float64 `json:"start_lag_max_ms"`

	// Wasted is the server's work for callers that had already given
	// up.
	Wasted Wasted `json:"wasted"`
	// Duplicates is what the server saw of the requests carrying an
	// Idempotency-Key: executions and completions beyond the first of
	// their key.
	Duplicates Duplicates `json:"duplicates"`
	// Entry is the callers' first attempts arriving at the server,
	// before and after errors began.
	Entry Entry `json:"entry"`

	// Server is the injector's final counters: requests passed, aborted by
	// an outage, rejected by the limit, cancelled while queued, and the
	// peaks of busy workers and queue.
	Server faultinject.Counters `json:"server"`
}

// Wasted is the server's work for callers that had already given up.
type Wasted struct {
	// Executions counts executions of the work handler, and HandlerS is
	// their total time in it, in seconds.
	Executions int64   `json:"executions"`
	HandlerS   float64 `json:"handler_s"`
	// WastedS is handler time spent after the request's caller had given
	// up: from the moment the handler saw its context end (or from its
	// start, when the caller had left before service began) until it
	// returned. A handler that honours cancellation wastes next to
	// nothing; one that does not (Server.IgnoreCancel) wastes the rest of
	// its service time. Share is WastedS / HandlerS.
	WastedS float64 `json:"wasted_s"`
	Share   float64 `json:"share"`
	// Cancelled executions saw their caller give up before they ended;
	// Abandoned ones started after their caller had given up.
	Cancelled int64 `json:"cancelled"`
	Abandoned int64 `json:"abandoned"`
	// QueueCancelled requests were given up by their caller while queued
	// and never reached the handler (no work wasted on them).
	QueueCancelled uint64 `json:"queue_cancelled"`
}

// Entry is the callers' entry traffic: first attempts arriving at the
// server, before and after errors begin.
type Entry struct {
	// ErrorsBeganS is when the first attempt failed, as its caller saw it,
	// in seconds from the start; -1 when none failed.
	ErrorsBeganS float64 `json:"errors_began_s"`
	// BaselinePerS is first attempts per second in the baseline window.
	BaselinePerS float64 `json:"baseline_per_s"`
	// AfterPerS is first attempts per second from ErrorsBeganS until
	// Duration; PeakPerS their highest rate over a sim.PeakWindow (1s)
	// window in that span; Growth is PeakPerS / BaselinePerS.
	AfterPerS float64 `json:"after_per_s"`
	PeakPerS  float64 `json:"peak_per_s"`
	Growth    float64 `json:"growth"`
	// SlopePerS2 is the least-squares trend of first attempts per second,
	// over whole seconds from ErrorsBeganS until Duration, in attempts/s
	// per second.
	SlopePerS2 float64 `json:"slope_per_s2"`
	// Rising reports whether AfterPerS is at least 1+EntryTolerance times
	// BaselinePerS: callers' first attempts kept rising after errors began
	// (a layer above retrying), so the budget of the layer below does not
	// bound the load.
	Rising bool `json:"rising"`
}

// Series is a live run's extra load-over-time data, at sim.ChartStep.
type Series struct {
	// StepMS is the length of one step of every slice below, in
	// milliseconds: sim.ChartStep rounded down to a whole number of the
	// recording's buckets (at least one bucket).
	StepMS float64 `json:"step_ms"`
	// Entry is first attempts per second arriving at the server.
	Entry []float64 `json:"entry_per_s"`
	// Concurrency is the most requests inside the server in each step;
	// Busy the most busy workers sampled in it.
	Concurrency []float64 `json:"concurrency"`
	Busy        []float64 `json:"busy"`
	// Wasted is handler time wasted per second (see Wasted.WastedS), by
	// the end of the execution.
	Wasted []float64 `json:"wasted_s_per_s"`
}

// measure computes a run's metrics and series from its recording. end is
// when the run ended (time since its start); srv the injector's counters.
func measure(sc *Scenario, x *raw, end time.Duration, srv faultinject.Counters, dup Duplicates) (sim.Metrics, sim.Series, Extra, Series) {
	rec := x.rec
	m := rec.Metrics(sc.Warmup, sc.Duration, sc.Faults)
	// The injector's queue peaks between the samples of the gauge.
	m.PeakQueue = max(m.PeakQueue, float64(srv.PeakWaiting))

	first := make([]int32, rec.Len())
	for i := range first {
		first[i] = rec.Attempts[i] - rec.Retries[i]
	}
	from, to := sim.BaselineWindow(sc.Warmup, sc.Duration, sc.Faults)
	var share float64
	if x.handler > 0 {
		share = x.wastedTotal.Seconds() / x.handler.Seconds()
	}
	e := Extra{
		ClientAttempts: x.clientAtt, ClientRetries: x.clientRetry,
		ClientSent: x.clientSent, SentRetries: x.sentRetry,
		ServerAttempts: x.serverAtt, ServerRetries: x.serverRetry,
		Lost: x.lost, RepliesLost: x.repliesLost, Reissues: x.reissues, ServerErrors: x.failedExec,
		StartLagMeanMS: millis(x.lagTotal) / max(float64(rec.Calls-x.reissues), 1),
		StartLagMaxMS:  millis(x.lagMax),
		Wasted: Wasted{
			Executions: x.executions,
			HandlerS:   x.handler.Seconds(),
			WastedS:    x.wastedTotal.Seconds(),
			Share:      share,
			Cancelled:  x.cancelled, Abandoned: x.abandoned,
			QueueCancelled: srv.Canceled,
		},
		Duplicates: dup,
		Entry:      entry(first, rec.AttemptsFailed, rec.Bucket, rec.Index(from), rec.Index(to), rec.Index(sc.Duration)),
		Server:     srv,
	}
	n := rec.Index(end) + 1
	return m, rec.Series(n), e, liveSeries(x, first, n)
}

// entry computes the entry-traffic measures from first attempts per
// bucket, failed attempts per bucket, the baseline buckets [bf, bt) and
// the bucket of Duration.
func entry(first, bad []int32, bucket time.Duration, bf, bt, limit int) Entry {
	e := Entry{ErrorsBeganS: -1}
	e.BaselinePerS = perSecond(first[bf:bt], bucket)
	eb := slices.IndexFunc(bad, func(n int32) bool { return n > 0 })
	if eb < 0 {
		return e
	}
	e.ErrorsBeganS = (time.Duration(eb) * bucket).Seconds()
	if eb >= limit {
		return e
	}
	span := first[eb:limit]
	e.AfterPerS = perSecond(span, bucket)
	e.PeakPerS = sim.PeakRate(span, bucket, sim.PeakWindow)
	if e.BaselinePerS > 0 {
		e.Growth = e.PeakPerS / e.BaselinePerS
	}
	e.Rising = e.BaselinePerS > 0 && e.AfterPerS >= (1+EntryTolerance)*e.BaselinePerS

	// Trend over whole seconds.
	per := max(int(time.Second/bucket), 1)
	var ys []float64
	for i := 0; i+per <= len(span); i += per {
		ys = append(ys, perSecond(span[i:i+per], bucket))
	}
	e.SlopePerS2 = slope(ys)
	return e
}

// perSecond returns the rate of counts per bucket over their span: 0 for
// no buckets.
func perSecond(counts []int32, bucket time.Duration) float64 {
	if len(counts) == 0 {
		return 0
	}
	var n int64
	for _, c := range counts {
		n += int64(c)
	}
	return float64(n) / (time.Duration(len(counts)) * bucket).Seconds()
}

// slope returns the least-squares slope of ys against 0, 1, 2, ….
func slope(ys []float64) float64 {
	n := float64(len(ys))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// liveSeries builds the live-only chart series over the first n buckets,
// in the steps of sim.Series (sim.ChartStep).
func liveSeries(x *raw, first []int32, n int) Series {
	bucket := x.rec.Bucket
	k := max(int(sim.ChartStep/bucket), 1)
	step := time.Duration(k) * bucket
	n = min(n, len(first))
	steps := (n + k - 1) / k
	l := Series{
		StepMS:      millis(step),
		Entry:       make([]float64, steps),
		Concurrency: make([]float64, steps),
		Busy:        make([]float64, steps),
		Wasted:      make([]float64, steps),
	}
	for i := range n {
		j := i / k
		l.Entry[j] += float64(first[i]) / step.Seconds()
		l.Concurrency[j] = max(l.Concurrency[j], float64(x.rec.Concurrency[i]))
		l.Busy[j] = max(l.Busy[j], float64(x.busy[i]))
		l.Wasted[j] += time.Duration(x.wasted[i]).Seconds() / step.Seconds()
	}
	return l
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
