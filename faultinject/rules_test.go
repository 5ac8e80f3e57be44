package faultinject_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

func TestRulesValidate(t *testing.T) {
	w := func(start, end time.Duration) faultinject.Window { return faultinject.Window{Start: start, End: end} }
	for _, tc := range []struct {
		name  string
		rules faultinject.Rules
		want  string // "" for valid; else a substring of the error
	}{
		{"zero", faultinject.Rules{}, ""},
		{"everything", faultinject.Rules{
			Latency: time.Millisecond, Jitter: time.Millisecond,
			Abort:        faultinject.AbortRule{Percent: 50, Status: 429, RetryAfter: time.Second},
			ResetPercent: 25, HangPercent: 25,
			Outages:     []faultinject.Window{{Start: 0, End: time.Second, Action: faultinject.Hang}},
			OutageCycle: time.Minute,
			Limit:       faultinject.Limit{Concurrency: 4, Queue: 8, QueueTimeout: time.Second, Status: 503, RetryAfter: time.Second},
		}, ""},
		{"negative latency", faultinject.Rules{Latency: -1}, "latency"},
		{"negative jitter", faultinject.Rules{Jitter: -1}, "jitter"},
		{"latency overflow", faultinject.Rules{Latency: math.MaxInt64, Jitter: 1}, "overflows"},
		{"abort over 100", faultinject.Rules{Abort: faultinject.AbortRule{Percent: 100.5}}, "abort percent"},
		{"NaN reset", faultinject.Rules{ResetPercent: math.NaN()}, "reset_percent"},
		{"negative hang", faultinject.Rules{HangPercent: -1}, "hang_percent"},
		{"sum over 100", faultinject.Rules{Abort: faultinject.AbortRule{Percent: 60}, ResetPercent: 41}, "add up"},
		{"abort status 200", faultinject.Rules{Abort: faultinject.AbortRule{Status: 200}}, "abort status"},
		{"limit status 600", faultinject.Rules{Limit: faultinject.Limit{Status: 600}}, "limit status"},
		{"negative concurrency", faultinject.Rules{Limit: faultinject.Limit{Concurrency: -1}}, "concurrency"},
		{"negative queue", faultinject.Rules{Limit: faultinject.Limit{Queue: -1}}, "queue"},
		{"negative queue timeout", faultinject.Rules{Limit: faultinject.Limit{QueueTimeout: -1}}, "queue_timeout"},
		{"window end before start", faultinject.Rules{Outages: []faultinject.Window{w(2, 1)}}, "not after"},
		{"empty window", faultinject.Rules{Outages: []faultinject.Window{w(1, 1)}}, "not after"},
		{"negative start", faultinject.Rules{Outages: []faultinject.Window{w(-1, 1)}}, "negative"},
		{"window past cycle", faultinject.Rules{OutageCycle: 10, Outages: []faultinject.Window{w(5, 11)}}, "past the outage_cycle"},
		{"window action reject", faultinject.Rules{Outages: []faultinject.Window{{End: 1, Action: faultinject.Reject}}}, "action"},
		{"window status", faultinject.Rules{Outages: []faultinject.Window{{End: 1, Status: 302}}}, "outage status"},
		{"second window", faultinject.Rules{Outages: []faultinject.Window{w(0, 1), w(3, 2)}}, "(outage 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rules.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, faultinject.ErrInvalidRules) || !strings.Contains(err.Error(), tc.want) ||
				!strings.HasPrefix(err.Error(), "faultinject: ") {
				t.Fatalf("Validate() = %v, want ErrInvalidRules mentioning %q", err, tc.want)
			}
		})
	}
}

func TestRulesCloneDoesNotShareOutages(t *testing.T) {
	r := faultinject.Rules{Outages: []faultinject.Window{{End: time.Second}}}
	c := r.Clone()
	c.Outages[0].End = time.Hour
	if r.Outages[0].End != time.Second {
		t.Fatal("Clone shares the Outages slice")
	}
	in := faultinject.New(faultinject.Config{Rules: r})
	r.Outages[0].End = time.Minute // the Injector kept its own copy
	got := in.Rules()
	got.Outages[0].End = time.Minute
	if in.Rules().Outages[0].End != time.Second {
		t.Fatal("the Injector's rules changed through a caller's slice")
	}
}

func TestRulesIsZero(t *testing.T) {
	if !(faultinject.Rules{}).IsZero() {
		t.Fatal("zero Rules not IsZero")
	}
	for _, r := range []faultinject.Rules{
		{Latency: 1}, {Jitter: 1}, {Abort: faultinject.AbortRule{Status: 500}}, {ResetPercent: 1},
		{HangPercent: 1}, {Outages: []faultinject.Window{{End: 1}}}, {OutageCycle: 1},
		{Limit: faultinject.Limit{Queue: 1}},
	} {
		if r.IsZero() {
			t.Errorf("%+v reported as zero", r)
		}
	}
}

func TestActionText(t *testing.T) {
	for a := faultinject.Pass; a <= faultinject.Queue; a++ {
		b, err := a.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back faultinject.Action
		if err := back.UnmarshalText(b); err != nil || back != a {
			t.Fatalf("%v: round trip gave %v, %v", a, back, err)
		}
	}
	if a, err := faultinject.ParseAction("respond"); err != nil || a != faultinject.Abort {
		t.Fatalf("ParseAction(respond) = %v, %v", a, err)
	}
	if _, err := faultinject.ParseAction("explode"); err == nil {
		t.Fatal("ParseAction accepted an unknown name")
	}
	if _, err := faultinject.Action(99).MarshalText(); err == nil || faultinject.Action(99).String() != "action(99)" {
		t.Fatal("an unknown Action marshalled")
	}
}
