package retry

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// DefaultSlogInterval is how often a SlogObserver logs the give-ups of one
// operation and reason at most, when SlogOptions.Interval is zero.
const DefaultSlogInterval = 10 * time.Second

// SlogOptions tunes NewSlogObserverOptions. The zero value is
// NewSlogObserver's behaviour.
type SlogOptions struct {
	// Level is the level of give-up lines. nil: slog.LevelWarn. Calls
	// that ended because the caller's own context ended log at Info
	// whatever Level says, unless Level is lower.
	Level slog.Leveler

	// Interval bounds the give-up lines to about two per operation and
	// reason per interval: the first give-up is logged in full at once,
	// the others are counted and summarised in one line ("retry: gave up
	// (summary)", with calls=N) when the interval has passed and the next
	// give-up or Flush comes. 0: DefaultSlogInterval. Negative: log every
	// give-up, which during a retry storm is a log storm.
	Interval time.Duration

	// Clock measures the intervals. nil: clock.Real.
	Clock clock.Clock
}

// NewSlogObserver returns a SlogObserver logging to l with the zero
// SlogOptions: failed attempts and scheduled retries at Debug, give-ups at
// Warn (Info when the caller's context ended), aggregated to about two
// lines per operation and reason every 10 s. Successful attempts are not
// logged. A nil l returns nil (no observer).
func NewSlogObserver(l *slog.Logger) Observer {
	if l == nil {
		return nil
	}
	return NewSlogObserverOptions(l, SlogOptions{})
}

// NewSlogObserverOptions returns a SlogObserver logging to l (which must
// not be nil) as o says.
func NewSlogObserverOptions(l *slog.Logger, o SlogOptions) *SlogObserver {
	s := &SlogObserver{l: l, level: o.Level, every: o.Interval, clk: clock.Or(o.Clock), keys: map[slogKey]*slogWindow{}}
	if s.level == nil {
		s.level = slog.LevelWarn
	}
	if s.every == 0 {
		s.every = DefaultSlogInterval
	}
	return s
}

// SlogObserver is the Observer of NewSlogObserver and
// NewSlogObserverOptions. It is safe for concurrent use.
type SlogObserver struct {
	l     *slog.Logger
	level slog.Leveler
	every time.Duration
	clk   clock.Clock

	mu   sync.Mutex
	keys map[slogKey]*slogWindow
}

// maxSlogKeys bounds the operations × reasons a SlogObserver keeps windows
// for; give-ups beyond it are summarised under the operation "(other)".
const maxSlogKeys = 1024

type slogKey struct {
	op     string
	reason Reason
}

// slogWindow is one operation and reason's interval: when it started and
// what was held back since.
type slogWindow struct {
	start    time.Time
	held     int // give-ups counted, not logged
	attempts int // their attempts
	last     error
}

// AttemptStart returns ctx.
func (s *SlogObserver) AttemptStart(ctx context.Context, _ AttemptStart) context.Context {
	return ctx
}

// AttemptEnd logs a failed attempt at Debug.
func (s *SlogObserver) AttemptEnd(ctx context.Context, e AttemptEnd) {
	if e.Err == nil || !s.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.l.LogAttrs(ctx, slog.LevelDebug, "retry: attempt failed",
		slog.String("operation", e.Operation), slog.Int("attempt", e.Attempt),
		slog.String("outcome", e.Outcome.String()), slog.Duration("duration", e.Duration),
		slog.Any("error", e.Err))
}

// RetryScheduled logs a retry at Debug.
func (s *SlogObserver) RetryScheduled(ctx context.Context, e RetryScheduled) {
	if !s.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.l.LogAttrs(ctx, slog.LevelDebug, "retry: retrying",
		slog.String("operation", e.Operation), slog.Int("attempt", e.Attempt),
		slog.Duration("delay", e.Delay), slog.Bool("advised", e.Advised), slog.Any("error", e.Err))
}

func (s *SlogObserver) levelOf(r Reason) slog.Level {
	l := s.level.Level()
	if r == ReasonContext && l > slog.LevelInfo {
		return slog.LevelInfo
	}
	return l
}

// CallEnd logs a call that gave up, or counts it for the summary of its
// operation and reason's interval.
func (s *SlogObserver) CallEnd(ctx context.Context, e CallEnd) {
	if e.Err == nil {
		return
	}
	level := s.levelOf(e.Reason)
	if !s.l.Enabled(ctx, level) {
		return
	}
	if s.every > 0 {
		now := s.clk.Now()
		k := slogKey{e.Operation, e.Reason}
		s.mu.Lock()
		w := s.keys[k]
		if w == nil && len(s.keys) >= maxSlogKeys {
			k.op = "(other)"
			w = s.keys[k]
		}
		if w != nil && now.Sub(w.start) < s.every {
			w.held++
			w.attempts += e.Attempts
			w.last = e.Err
			s.mu.Unlock()
			return
		}
		var sum slogWindow
		if w == nil {
			w = new(slogWindow)
			s.keys[k] = w
		} else {
			sum = *w
		}
		*w = slogWindow{start: now}
		s.mu.Unlock()
		s.summary(ctx, k, sum, now)
	}
	s.l.LogAttrs(ctx, level, "retry: gave up",
		slog.String("operation", e.Operation), slog.Int("attempts", e.Attempts),
		slog.String("reason", e.Reason.String()), slog.Duration("duration", e.Duration),
		slog.Any("error", e.Err))
}

// summary logs what w held back, if anything.
func (s *SlogObserver) summary(ctx context.Context, k slogKey, w slogWindow, now time.Time) {
	if w.held == 0 {
		return
	}
	s.l.LogAttrs(ctx, s.levelOf(k.reason), "retry: gave up (summary)",
		slog.String("operation", k.op), slog.String("reason", k.reason.String()),
		slog.Int("calls", w.held), slog.Int("attempts", w.attempts),
		slog.Duration("over", now.Sub(w.start)), slog.Any("last_error", w.last))
}

// Flush logs the summaries of the give-ups held back so far, for example
// at shutdown or from a ticker of the caller's, and starts new intervals.
func (s *SlogObserver) Flush() {
	now := s.clk.Now()
	type held struct {
		k slogKey
		w slogWindow
	}
	var out []held
	s.mu.Lock()
	for k, w := range s.keys {
		if w.held > 0 {
			out = append(out, held{k, *w})
			*w = slogWindow{start: now}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b held) int {
		if c := strings.Compare(a.k.op, b.k.op); c != 0 {
			return c
		}
		return int(a.k.reason) - int(b.k.reason)
	})
	for _, h := range out {
		s.summary(context.Background(), h.k, h.w, now)
	}
}
