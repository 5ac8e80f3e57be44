package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// ErrClosed reports work that Close left undone: Close returns it (wrapped
// with the context's error) when records remain undelivered, and a
// Scheduler passes it to the done function of every task it abandons.
var ErrClosed = errors.New("queue: closed")

// Overflow says which record a full Queue drops.
type Overflow uint8

// Overflow policies.
const (
	// DropOldest evicts the oldest buffered record to make room for the
	// new one: the queue keeps the most recent data (the default, and the
	// right choice for telemetry).
	DropOldest Overflow = iota
	// DropNewest refuses the new record and keeps the buffered ones.
	DropNewest
)

// Defaults used for zero Config fields.
const (
	DefaultCapacity = 2048
	DefaultMaxBatch = 512
	DefaultLinger   = time.Second
	DefaultWorkers  = 1
)

// Config configures a Queue. Every field is optional; the zero Config
// buffers 2048 records and delivers them in batches of up to 512 from one
// worker, at most a second after the first of them arrived, under the zero
// retry.Policy.
type Config[T any] struct {
	// Name labels the queue in Observer calls (the {queue} metric label).
	Name string

	// Capacity is the number of records the buffer holds. Records taken by
	// workers for delivery are not in the buffer, so at most
	// Capacity + Workers·MaxBatch records are held at once.
	// 0: DefaultCapacity.
	Capacity int

	// Overflow chooses what a full buffer drops. Zero: DropOldest.
	Overflow Overflow

	// Workers is the number of goroutines delivering batches, hence the
	// most deliveries in progress at once. 0: DefaultWorkers.
	Workers int

	// MaxBatch bounds the records in one batch; a batch is sent as soon as
	// this many are buffered. 0: DefaultMaxBatch. Values above Capacity are
	// lowered to Capacity.
	MaxBatch int

	// MaxBatchBytes bounds the summed Size of the records in one batch
	// (a single record larger than it is sent alone); a batch is sent as
	// soon as this many bytes are buffered. 0: no byte limit. Requires Size.
	// A limit above MaxInt/Capacity-1 (more than the buffer's sizes can
	// sum to) acts as MaxInt/Capacity-1.
	MaxBatchBytes int

	// Size returns a record's size in bytes, for MaxBatchBytes. It is
	// called once per Offer, outside the queue's lock, and only when
	// MaxBatchBytes is set. A negative size counts as 0; a size above
	// MaxBatchBytes counts as just above it, so such a record is still
	// sent alone and no sum of sizes overflows.
	Size func(T) int

	// Linger is the longest a buffered record waits for a batch to fill
	// before a worker sends what there is (measured from the moment the
	// buffer became non-empty). 0: DefaultLinger. Negative: send at once.
	Linger time.Duration

	// Policy governs each delivery, through retry.Run: backoff, jitter,
	// Retry-After, budget, breaker, attempt timeout and the error
	// classification. nil: the zero retry.Policy. Its Backoff also paces
	// the queue's pause after a delivery that gave up (see Queue).
	Policy *retry.Policy

	// Clock times Linger and the pauses after failed deliveries, and the
	// deliveries' retries when Policy.Clock is nil (the Policy is then
	// copied, with its Budget and Breaker still shared). nil: Policy.Clock,
	// and clock.Real if that is nil too.
	Clock clock.Clock

	// Observer is told about drops and depth. nil: none.
	Observer Observer
}

// Validate reports a configuration New would reject.
func (c *Config[T]) Validate() error {
	switch {
	case c.Capacity < 0:
		return errors.New("queue: negative Capacity")
	case c.Workers < 0:
		return errors.New("queue: negative Workers")
	case c.MaxBatch < 0:
		return errors.New("queue: negative MaxBatch")
	case c.MaxBatchBytes < 0:
		return errors.New("queue: negative MaxBatchBytes")
	case c.MaxBatchBytes > 0 && c.Size == nil:
		return errors.New("queue: MaxBatchBytes needs a Size function")
	case c.Overflow > DropNewest:
		return fmt.Errorf("queue: unknown Overflow %d", c.Overflow)
	}
	return nil
}

// Stats is a consistent snapshot of a Queue's counters: all fields are read
// under one lock, so at every instant
//
//	Offered == Delivered + DroppedFull + DroppedPermanent + Pending
//	Pending == Buffered + InFlight
type Stats struct {
	// Offered counts records accepted by Offer before Close (including
	// records that DropNewest refused at once for lack of room).
	Offered uint64
	// Delivered counts records in batches whose delivery succeeded.
	Delivered uint64
	// DroppedFull counts records dropped for lack of room: evicted or
	// refused by the Overflow policy at Offer, or, when a delivery that
	// gave up puts its batch back into the buffer, the records that no
	// longer fit (the batch's oldest under DropOldest, the newest buffered
	// records under DropNewest).
	DroppedFull uint64
	// DroppedPermanent counts records in batches whose delivery failed with
	// an error the Policy does not retry (retry.Permanent, or Classify
	// false); they are never retried.
	DroppedPermanent uint64
	// Pending counts records accepted and neither delivered nor dropped:
	// those in the buffer plus those in a batch being delivered (in flight,
	// including batches waiting between retries). After Close it is the
	// number of records Close left undelivered.
	Pending uint64
	// Buffered and InFlight split Pending.
	Buffered, InFlight uint64
	// Rejected counts records offered after Close; they are not in Offered.
	Rejected uint64
	// Panics counts the panics (and runtime.Goexit calls) a worker
	// recovered: in deliveries, whose batches were put back into the
	// buffer as after a delivery that gave up, and in the callbacks a
	// worker makes (Observer, Clock, the Policy's Backoff and Rand for the
	// pause); see New. It counts panics, not records, and is not part of
	// the identities above.
	Panics uint64
}

// Queue is a bounded background delivery queue for fire-and-forget records
// such as telemetry: Offer puts a record in a fixed-capacity ring buffer
// without blocking, and worker goroutines deliver the records in batches
// through a user function under a retry.Policy.
//
// Memory is bounded whatever the downstream does: when the buffer is full,
// the Overflow policy drops a record and counts it. A batch whose delivery
// fails permanently is dropped and counted, never retried. A batch whose
// delivery gives up for any other reason (attempts or time exhausted,
// budget refused, breaker open, a panic: see New) goes back to the oldest end of the buffer —
// where DropOldest evicts it first once newer records need the room — and
// the whole queue pauses before the next delivery for the Policy's next
// backoff delay (raised to the error's Retry-After advice, capped by
// Policy.MaxRetryAfter and jittered as retry.Do does), growing with each
// consecutive give-up and reset by the first success; records put back are
// sent as soon as the pause ends, without lingering. So while a collector
// is down the queue makes at most Workers delivery calls at a time, each
// paced by the Policy's backoff and limited by its budget and breaker, and
// pauses after each one that gives up. (A delivery after a pause is a new
// retry.Run call, whose first attempt a Budget does not gate: the pause is
// what paces it.)
//
// Create a Queue with New and stop it with Close; Stats may be read at any
// time. A Queue is safe for concurrent use.
type Queue[T any] struct {
	name     string
	overflow Overflow
	maxBatch int
	maxBytes int
	size     func(T) int
	sizeCap  int // the most a record's Size counts for; see clampSize
	linger   time.Duration
	policy   *retry.Policy
	clock    clock.Clock
	obs      Observer
	deliver  func(context.Context, []T) error

	ctx    context.Context // delivery context; cancelled when Close gives up
	cancel context.CancelCauseFunc

	wake      chan struct{} // capacity 1: "look at the buffer again"
	closingCh chan struct{} // closed by the first Close
	exited    chan struct{} // closed by the last worker to return

	mu       sync.Mutex
	buf      ring[T]
	bytes    int          // summed size of buffered records
	since    time.Time    // when the buffer last became non-empty
	resumeAt time.Time    // no delivery starts before this
	pacing   retry.Policy // times the pauses; see pause
	pacer    *retry.Call  // the deliveries that gave up since the last success
	closing  bool
	live     int // workers running
	reported bool
	st       Stats
}

// New starts a Queue that delivers batches through deliver. deliver
// receives a batch of one or more records in the order offered and must
// return when ctx ends; it must not keep the slice after returning. It runs
// under Config.Policy, so its error decides what happens to the batch: nil
// delivers it, an error the Policy does not retry (wrap it with
// retry.Permanent) drops it, any other error is retried.
//
// A panic in deliver (or a call of runtime.Goexit) does not end the worker
// or the program, and loses no record: the delivery's retry.Run reports
// the attempt as failed (to the Policy's Breaker, Budget and Observer, as
// a *retry.PanicError), the worker recovers the panic, counts it in
// Stats.Panics and treats the delivery as one that gave up: the batch goes
// back to the oldest end of the buffer and the queue pauses, as described
// at Queue; the worker goes on (after Goexit, a new worker takes its
// place). A panic in a callback of the Policy during a delivery is
// handled the same way. The panic itself is not re-raised, as no caller
// waits for the delivery; the Policy's Observer hears of it. A batch that
// panics every time is retried like one the collector keeps refusing,
// until DropOldest evicts it or Close gives up on it.
//
// The other callbacks a worker makes are guarded the same way, each panic
// counted in Stats.Panics: a panicking Observer call is skipped and the
// worker goes on; a panicking Clock, or Backoff or Rand source of the
// Policy pacing the pause after a delivery that gave up, ends the worker's
// round with the queue's lock released and any batch it had taken put
// back, and the worker starts the next round (a pause whose computation
// panicked is not taken). After two rounds in a row that panic, the
// worker waits 100 ms on the real clock (or until Close gives up) before
// its next round, so that a callback that panics on every call cannot
// spin it.
//
// A panic in Config.Size goes on to Offer's caller, with nothing counted
// and the queue unchanged. On Offer's and Close's goroutines, a panicking
// Clock or Observer goes on to the caller too, with the queue's lock
// released and its counts consistent: a record Offer had buffered stays
// buffered and counted, and is delivered.
//
// New panics if deliver is nil or cfg does not Validate.
func New[T any](cfg Config[T], deliver func(ctx context.Context, batch []T) error) *Queue[T] {
	if deliver == nil {
		panic("queue: nil deliver function")
	}
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	capacity := cmp.Or(cfg.Capacity, DefaultCapacity)
	workers := cmp.Or(cfg.Workers, DefaultWorkers)
	maxBatch := min(cmp.Or(cfg.MaxBatch, DefaultMaxBatch), capacity)
	linger := cfg.Linger
	if linger == 0 {
		linger = DefaultLinger
	}
	clk, policy := cfg.Clock, cfg.Policy
	switch {
	case clk == nil && policy != nil:
		clk = policy.Clock
	case clk != nil && (policy == nil || policy.Clock == nil):
		// Deliveries wait on the queue's clock too.
		p := retry.Policy{}
		if policy != nil {
			p = *policy
		}
		p.Clock = clk
		policy = &p
	}
	q := &Queue[T]{
		name:      cfg.Name,
		overflow:  cfg.Overflow,
		maxBatch:  maxBatch,
		maxBytes:  cfg.MaxBatchBytes,
		size:      cfg.Size,
		linger:    linger,
		policy:    policy,
		clock:     clock.Or(clk),
		obs:       cfg.Observer,
		deliver:   deliver,
		wake:      make(chan struct{}, 1),
		closingCh: make(chan struct{}),
		exited:    make(chan struct{}),
		buf:       newRing[T](capacity, cfg.MaxBatchBytes > 0),
		live:      workers,
	}
	if cfg.MaxBatchBytes == 0 {
		q.size = nil
	} else {
		// A record larger than the byte limit still counts as larger (so
		// it is sent alone), and no sum of up to Capacity sizes overflows:
		// a limit beyond MaxInt/Capacity-1 bytes (which no buffer holds)
		// acts as that.
		q.maxBytes = min(q.maxBytes, math.MaxInt/capacity-1)
		q.sizeCap = q.maxBytes + 1
	}
	q.pacing = retry.Policy{Clock: clk, Classify: retryAll, MaxAttempts: retry.Unlimited}
	if policy != nil {
		q.pacing.Backoff, q.pacing.MaxRetryAfter, q.pacing.Rand = policy.Backoff, policy.MaxRetryAfter, policy.Rand
	}
	q.ctx, q.cancel = context.WithCancelCause(context.Background())
	for range workers {
		go newWorker(q).run()
	}
	return q
}

// Offer queues v for delivery without blocking. It reports whether v was
// buffered: false after Close (v is counted in Stats.Rejected) or when the
// buffer is full under DropNewest (v is counted as offered and dropped).
// Under DropOldest a full buffer evicts its oldest record instead, and
// Offer returns true.
//
// Offer does not allocate: the buffer is allocated by New.
func (q *Queue[T]) Offer(v T) bool {
	size := 0
	if q.size != nil {
		size = q.clampSize(q.size(v))
	}
	q.mu.Lock()
	if q.closing {
		q.st.Rejected++
		q.mu.Unlock()
		return false
	}
	q.st.Offered++
	dropped := false
	if q.buf.full() {
		q.st.DroppedFull++
		if q.overflow == DropNewest {
			q.mu.Unlock()
			if q.obs != nil {
				q.obs.QueueDropped(q.name, DropFull, 1)
			}
			return false
		}
		_, s := q.buf.popFront()
		q.bytes -= s
		q.st.Buffered--
		dropped = true
	}
	wasEmpty := q.buf.n == 0
	q.buf.pushBack(v, size)
	q.bytes += size
	q.st.Buffered++
	signal := false
	switch {
	case wasEmpty:
		q.since = q.nowLocked()
		signal = true
	case q.buf.n == q.maxBatch:
		signal = true
	case q.maxBytes > 0 && q.bytes >= q.maxBytes && q.bytes-size < q.maxBytes:
		signal = true
	}
	report := q.obs != nil && (signal || (!dropped && q.buf.full()))
	depth := q.st.Buffered + q.st.InFlight
	q.mu.Unlock()
	if signal {
		q.signal()
	}
	if q.obs != nil {
		if dropped {
			q.obs.QueueDropped(q.name, DropFull, 1)
		}
		if report {
			q.obs.QueueDepth(q.name, int(depth))
		}
	}
	return true
}

// clampSize bounds a record's size: a negative Size counts as 0, and one
// above MaxBatchBytes as just above it (or less when that many of them
// would overflow the buffer's byte count), which sends it alone as well.
func (q *Queue[T]) clampSize(n int) int {
	return min(max(n, 0), q.sizeCap)
}

// nowLocked reads the clock for Offer, with q.mu held. If the Clock
// panics, it unlocks q.mu and wakes a worker before the panic goes on to
// Offer's caller: the record stays buffered and counted (with the time
// its buffer last filled from, so it is due at once), and the queue stays
// usable.
func (q *Queue[T]) nowLocked() time.Time {
	ok := false
	defer func() {
		if !ok {
			q.mu.Unlock()
			q.signal()
		}
	}()
	t := q.clock.Now()
	ok = true
	return t
}

// signal wakes one idle worker, if none has been woken already.
func (q *Queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Stats returns a consistent snapshot of the counters.
func (q *Queue[T]) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.st
	s.Pending = s.Buffered + s.InFlight
	return s
}

// Close stops accepting records and delivers what it can before ctx ends:
// workers keep sending batches (respecting the Policy and any pause) until
// the buffer is empty. If ctx ends first, Close cancels the deliveries in
// progress, waits for the workers to return and gives up on the rest.
// With an expired ctx it returns as soon as the deliveries in progress
// have seen the cancellation.
//
// Close returns the number of records left undelivered (Stats.Pending from
// then on) and, when that is not zero, an error wrapping ErrClosed and the
// reason (ctx's error). No goroutine started by the Queue outlives Close.
// Close may be called more than once; every call waits as the first.
func (q *Queue[T]) Close(ctx context.Context) (remaining int, err error) {
	q.mu.Lock()
	if !q.closing {
		q.closing = true
		close(q.closingCh)
	}
	q.mu.Unlock()

	select {
	case <-q.exited:
	case <-ctx.Done():
		q.cancel(ctx.Err())
		<-q.exited
	}
	q.cancel(context.Canceled) // releases the context; no-op if done

	q.mu.Lock()
	n := q.st.Buffered + q.st.InFlight
	report := q.obs != nil && !q.reported
	q.reported = true
	q.mu.Unlock()
	if report {
		if n > 0 {
			q.obs.QueueDropped(q.name, DropClosed, int(n))
		}
		q.obs.QueueDepth(q.name, int(n))
	}
	if n == 0 {
		return 0, nil
	}
	return int(n), fmt.Errorf("%w with %d records undelivered: %w", ErrClosed, n, context.Cause(q.ctx))
}
