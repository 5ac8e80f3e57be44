package retry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// The review's outage: 709 give-ups in 4.5 s logged 709 Warn lines. Now
// each operation and reason logs its first give-up and one summary per
// interval, and the summaries account for every call.
func TestSlogObserverDoesNotStormDuringAStorm(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	clk := clocktest.NewFake()
	o := retry.NewSlogObserverOptions(l, retry.SlogOptions{Clock: clk})
	ctx := context.Background()
	ops := []string{"charge", "refund"}
	reasons := []retry.Reason{retry.ReasonAttempts, retry.ReasonBudget}
	const n = 709
	for i := range n {
		o.CallEnd(ctx, retry.CallEnd{Operation: ops[i%2], Reason: reasons[(i/2)%2], Attempts: 3, Err: errors.New("503")})
		clk.Advance(4500 * time.Millisecond / n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines for %d give-ups in 4.5 s, want 4 (one per operation and reason):\n%s", len(lines), n, buf.String())
	}
	for _, ln := range lines {
		if !strings.Contains(ln, "level=WARN") || !strings.Contains(ln, `msg="retry: gave up"`) {
			t.Fatalf("line %q: want a full give-up at Warn", ln)
		}
	}
	buf.Reset()
	o.Flush()
	sum := 0
	re := regexp.MustCompile(`msg="retry: gave up \(summary\)" operation=(\w+) reason=(\w+) calls=(\d+) attempts=(\d+)`)
	summaries := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, ln := range summaries {
		m := re.FindStringSubmatch(ln)
		if m == nil {
			t.Fatalf("summary line %q does not match", ln)
		}
		c, _ := strconv.Atoi(m[3])
		a, _ := strconv.Atoi(m[4])
		if a != 3*c {
			t.Fatalf("summary %q: attempts %d for %d calls", ln, a, c)
		}
		sum += c
	}
	if len(summaries) != 4 || sum+4 != n {
		t.Fatalf("%d summaries accounting for %d calls (+4 logged), want 4 and %d:\n%s", len(summaries), sum, n, buf.String())
	}
	// After the interval the next give-up brings out the summary of what
	// was held back, then itself.
	buf.Reset()
	o.CallEnd(ctx, retry.CallEnd{Operation: "charge", Reason: retry.ReasonAttempts, Attempts: 3, Err: errors.New("503")})
	o.CallEnd(ctx, retry.CallEnd{Operation: "charge", Reason: retry.ReasonAttempts, Attempts: 3, Err: errors.New("503")})
	clk.Advance(retry.DefaultSlogInterval)
	o.CallEnd(ctx, retry.CallEnd{Operation: "charge", Reason: retry.ReasonAttempts, Attempts: 3, Err: errors.New("503")})
	got := buf.String()
	if strings.Count(got, "\n") != 2 || !strings.Contains(got, "calls=2") {
		t.Fatalf("after the interval: %q, want a summary of 2 then the give-up", got)
	}
}

func TestSlogObserverLevelAndEveryLine(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := retry.NewSlogObserverOptions(l, retry.SlogOptions{Level: slog.LevelError, Interval: -1})
	for range 3 {
		o.CallEnd(context.Background(), retry.CallEnd{Operation: "op", Reason: retry.ReasonAttempts, Attempts: 2, Err: errors.New("x")})
	}
	o.CallEnd(context.Background(), retry.CallEnd{Operation: "op", Reason: retry.ReasonContext, Attempts: 1, Err: context.Canceled})
	got := buf.String()
	if strings.Count(got, "level=ERROR") != 3 || strings.Count(got, "level=INFO") != 1 {
		t.Fatalf("want 3 give-ups at ERROR and the caller's cancellation at INFO:\n%s", got)
	}
}
