package sim

import (
	"time"

	"github.com/stormguard/stormguard/admission"
)

// paperDatabase is the metastable scenario's database (Bronson et al.'s
// example): 24 workers, service uniform in [60ms, 100ms] (300/s), legs
// |Normal(1ms, 0.2ms)|; 10 app instances at 28 calls/s (280/s), a 1s
// attempt timeout.
func paperDatabase() OverloadModel {
	return OverloadModel{
		Clients: 10, Rate: 28,
		Duration: 90 * time.Second, Drain: 10 * time.Second, Warmup: 5 * time.Second,
		Attempts: 2, Timeout: time.Second,
		Workers: 24, Service: Uniform(60*time.Millisecond, 100*time.Millisecond),
		Latency: Normal(time.Millisecond, 200*time.Microsecond),
	}
}

// metastableServerCases are the metastable-server scenario's cases: the
// paper's trigger (every query 1s slower to reach the database for 10s,
// so every attempt times out and the naive clients double the load), and
// a surge (as many calls again for 10s: 560/s against 300/s) while the
// network is fine, over which goodput during the overload is measured.
func metastableServerCases() []overloadCase {
	paper := paperDatabase()
	paper.Trigger = OverloadTrigger{Start: 20 * time.Second, End: 30 * time.Second, Extra: time.Second}
	paper.Window = [2]time.Duration{30 * time.Second, 50 * time.Second}
	surge := paperDatabase()
	surge.Trigger = OverloadTrigger{Start: 20 * time.Second, End: 30 * time.Second, Surge: 280}
	surge.Window = [2]time.Duration{21 * time.Second, 30 * time.Second}
	return []overloadCase{
		{Name: "paper: queries 1s slower for 10s", Model: paper, WindowDoc: "the 20s after the trigger"},
		{Name: "surge: 2x the calls for 10s", Model: surge, WindowDoc: "the surge, from its second second"},
	}
}

// metastableServerControls are the contenders at the database.
func metastableServerControls() []ServerControl {
	return []ServerControl{
		{Name: "none", Kind: ControlNone, Doc: "no control: one unbounded FIFO queue in front of the 24 workers (the paper's database)"},
		{Name: "static-50", Kind: ControlStatic, Limit: 50, Doc: "layer.Limit(50): at most 50 requests inside the database (about twice its workers, a good guess), the rest answered 503 at once"},
		{Name: "static-500", Kind: ControlStatic, Limit: 500, Doc: "layer.Limit(500): the same rule with a guess too high (500 inside wait up to 1.6s for a worker, past the 1s timeout)"},
		{Name: "adaptive", Kind: ControlAdmission, Doc: "the real admission.Limiter: Gradient2 with its defaults, a queue of 100 under CoDel (5ms target, 100ms interval) and adaptive LIFO, queued requests past their caller's deadline dropped"},
	}
}

// failAtScaleCase is Fail at Scale's claim at 2x overload: 600 calls/s
// (280/s steady, 320/s more from 20s to 50s) against the 300/s database,
// one attempt each under a 1s deadline, no retries.
func failAtScaleCase() overloadCase {
	m := paperDatabase()
	m.Attempts = 1
	m.Duration = 70 * time.Second
	m.Trigger = OverloadTrigger{Start: 20 * time.Second, End: 50 * time.Second, Surge: 320}
	m.Window = [2]time.Duration{25 * time.Second, 50 * time.Second}
	return overloadCase{Name: "2x overload: 600 calls/s for 30s", Model: m, WindowDoc: "the overload, from its sixth second"}
}

// FailAtScaleQueue is the queue size every fail-at-scale contender has.
const FailAtScaleQueue = 1000

func failAtScaleControls() []ServerControl {
	return []ServerControl{
		{Name: "fifo", Kind: ControlNone, Queue: FailAtScaleQueue, Doc: "a plain FIFO queue of 1,000 in front of the 24 workers, a full queue answering 503"},
		{Name: "codel+lifo", Kind: ControlAdmission, Queue: FailAtScaleQueue, NewLimit: func() admission.Limit { return admission.Fixed{N: 24} },
			Doc: "the same queue of 1,000 under admission's CoDel (5ms target, 100ms interval) and adaptive LIFO, in front of the 24 workers (admission.Fixed{N: 24})"},
		{Name: "adaptive+codel+lifo", Kind: ControlAdmission, Queue: FailAtScaleQueue,
			Doc: "the real admission.Limiter with Gradient2 (its defaults) behind the same CoDel and LIFO queue of 1,000"},
	}
}

// overloadCase is one case of a server-side scenario.
type overloadCase struct {
	Name      string
	Model     OverloadModel
	WindowDoc string
}
