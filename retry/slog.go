package retry

import (
	"context"
	"log/slog"
)

// NewSlogObserver returns an Observer that logs to l: failed attempts and
// scheduled retries at Debug, calls that gave up at Warn (Info when the
// caller's context ended). Successful attempts are not logged. A nil l
// returns nil (no observer).
func NewSlogObserver(l *slog.Logger) Observer {
	if l == nil {
		return nil
	}
	return slogObserver{l}
}

type slogObserver struct{ l *slog.Logger }

func (s slogObserver) AttemptStart(ctx context.Context, _ AttemptStart) context.Context { return ctx }

func (s slogObserver) AttemptEnd(ctx context.Context, e AttemptEnd) {
	if e.Err == nil || !s.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.l.LogAttrs(ctx, slog.LevelDebug, "retry: attempt failed",
		slog.String("operation", e.Operation), slog.Int("attempt", e.Attempt),
		slog.String("outcome", e.Outcome.String()), slog.Duration("duration", e.Duration),
		slog.Any("error", e.Err))
}

func (s slogObserver) RetryScheduled(ctx context.Context, e RetryScheduled) {
	if !s.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.l.LogAttrs(ctx, slog.LevelDebug, "retry: retrying",
		slog.String("operation", e.Operation), slog.Int("attempt", e.Attempt),
		slog.Duration("delay", e.Delay), slog.Bool("advised", e.Advised), slog.Any("error", e.Err))
}

func (s slogObserver) CallEnd(ctx context.Context, e CallEnd) {
	if e.Err == nil {
		return
	}
	level := slog.LevelWarn
	if e.Reason == ReasonContext {
		level = slog.LevelInfo
	}
	s.l.LogAttrs(ctx, level, "retry: gave up",
		slog.String("operation", e.Operation), slog.Int("attempts", e.Attempts),
		slog.String("reason", e.Reason.String()), slog.Duration("duration", e.Duration),
		slog.Any("error", e.Err))
}
