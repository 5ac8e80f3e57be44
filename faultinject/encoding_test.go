package faultinject_test

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

var fullRules = faultinject.Rules{
	Latency: 50 * time.Millisecond, Jitter: 20 * time.Millisecond,
	Abort:        faultinject.AbortRule{Percent: 10, Status: 503, RetryAfter: 2 * time.Second},
	ResetPercent: 1, HangPercent: 0.5,
	Outages: []faultinject.Window{
		{Start: 10 * time.Second, End: 20 * time.Second, Action: faultinject.Abort, Status: 502, RetryAfter: time.Second},
		{Start: 30 * time.Second, End: 40 * time.Second, Action: faultinject.Hang},
	},
	OutageCycle: time.Minute,
	Limit:       faultinject.Limit{Concurrency: 8, Queue: 16, QueueTimeout: time.Second, Status: 429, RetryAfter: time.Second},
}

func TestRulesJSONRoundTrip(t *testing.T) {
	for _, r := range []faultinject.Rules{{}, fullRules} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := faultinject.ParseRules(b)
		if err != nil {
			t.Fatalf("ParseRules(%s) = %v", b, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %+v gave %+v (json %s)", r, back, b)
		}
	}
	b, _ := json.Marshal(fullRules)
	for _, want := range []string{`"latency":"50ms"`, `"retry_after":"2s"`, `"action":"hang"`, `"outage_cycle":"1m0s"`, `"hang_percent":0.5`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
}

func TestParseRules(t *testing.T) {
	r, err := faultinject.ParseRules([]byte(`{
		"latency": "50ms", "jitter": 0,
		"abort": {"percent": "10%", "status": 503},
		"reset_percent": 1.5,
		"outages": [{"start": "10s", "end": "20s"}, {"start": "30s", "end": "40s", "action": "respond"}],
		"limit": {"concurrency": 2, "queue_timeout": "1s"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := faultinject.Rules{
		Latency: 50 * time.Millisecond, Abort: faultinject.AbortRule{Percent: 10, Status: 503}, ResetPercent: 1.5,
		Outages: []faultinject.Window{
			{Start: 10 * time.Second, End: 20 * time.Second, Action: faultinject.Abort},
			{Start: 30 * time.Second, End: 40 * time.Second, Action: faultinject.Abort},
		},
		Limit: faultinject.Limit{Concurrency: 2, QueueTimeout: time.Second},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}

	for _, tc := range []struct{ in, want string }{
		{`{"lantency": "1s"}`, "unknown field"},
		{`{"latency": 5}`, "not a string"},
		{`{"latency": "5 parsecs"}`, "bad duration"},
		{`{"latency": "-1s"}`, "negative"},
		{`{"abort": {"percent": "x%"}}`, "bad percentage"},
		{`{"abort": {"percent": true}}`, "not a number"},
		{`{"reset_percent": 101}`, "reset_percent"},
		{`{"outages": [{"end": "1s", "action": "pass"}]}`, "not abort, reset or hang"},
		{`{"outages": [{"end": "1s", "action": "boom"}]}`, "unknown action"},
		{`{} {}`, "data after"},
		{`[1]`, "faultinject"},
	} {
		if _, err := faultinject.ParseRules([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRules(%s) = %v, want an error mentioning %q", tc.in, err, tc.want)
		}
	}
	if _, err := faultinject.ParseRules([]byte(`{"hang_percent": 60, "reset_percent": 60}`)); !errors.Is(err, faultinject.ErrInvalidRules) {
		t.Errorf("invalid rules: %v, want ErrInvalidRules", err)
	}
}

func TestParseDurationAndPercent(t *testing.T) {
	for s, want := range map[string]time.Duration{"0": 0, "250ms": 250 * time.Millisecond, " 1m30s ": 90 * time.Second} {
		if d, err := faultinject.ParseDuration(s); err != nil || d != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, d, err, want)
		}
	}
	for _, s := range []string{"", "1", "-1s", "1x", "ms"} {
		if _, err := faultinject.ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
	for s, want := range map[string]float64{"0": 0, "12.5": 12.5, "12.5%": 12.5, " 0.1 % ": 0.1, "100%": 100} {
		if p, err := faultinject.ParsePercent(s); err != nil || p != want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", s, p, err, want)
		}
	}
	for _, s := range []string{"", "%", "-1", "100.01", "NaN", "Inf", "1e400", "ten"} {
		if _, err := faultinject.ParsePercent(s); err == nil {
			t.Errorf("ParsePercent(%q) accepted", s)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "250ms", "1m30s", "-1s", "1.5h", " 2s ", "9223372036854775807ns", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := faultinject.ParseDuration(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "faultinject: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		back, err := faultinject.ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v, but its String %q parses to %v, %v", s, d, d.String(), back, err)
		}
	})
}

func FuzzParsePercent(f *testing.F) {
	for _, s := range []string{"0", "12.5", "12.5%", "100", "100.0001", "-0", "NaN", "1e2", "0x1p-2", " 3 % "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := faultinject.ParsePercent(s)
		if err != nil {
			return
		}
		if !(p >= 0 && p <= 100) || math.IsNaN(p) {
			t.Fatalf("ParsePercent(%q) = %v outside [0, 100]", s, p)
		}
		back, err := faultinject.ParsePercent(strconv.FormatFloat(p, 'g', -1, 64) + "%")
		if err != nil || back != p {
			t.Fatalf("ParsePercent(%q) = %v; re-parsing gave %v, %v", s, p, back, err)
		}
	})
}

func FuzzParseRules(f *testing.F) {
	full, _ := json.Marshal(fullRules)
	for _, s := range []string{`{}`, string(full), `{"latency":"1s","abort":{"percent":"5%"}}`,
		`{"outages":[{"start":"1s","end":"2s","action":"reset"}],"outage_cycle":"10s"}`, `{"limit":{"concurrency":1}}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := faultinject.ParseRules(data)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseRules returned invalid rules: %v", err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("Marshal(%+v) = %v", r, err)
		}
		back, err := faultinject.ParseRules(b)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", b, err)
		}
		b2, _ := json.Marshal(back)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the rules:\n%s\n%s", b, b2)
		}
		// An Injector accepts whatever ParseRules accepts.
		in := faultinject.New(faultinject.Config{Rules: r})
		if err := in.Update(back); err != nil {
			t.Fatal(err)
		}
	})
}

// TestParseRulesErrorsNamePackage: every error ParseRules returns starts
// with the package name, syntax errors and empty input included (before
// the fix they were encoding/json's bare errors), and still wraps the
// underlying error.
func TestParseRulesErrorsNamePackage(t *testing.T) {
	for _, in := range []string{``, `{`, `nope`, `{"bogus": 1}`, `{"latency": 5}`, `{} {}`} {
		_, err := faultinject.ParseRules([]byte(in))
		if err == nil || !strings.HasPrefix(err.Error(), "faultinject: ") || strings.Count(err.Error(), "faultinject: rules:") > 1 {
			t.Errorf("ParseRules(%q) = %v, want an error starting with the package name once", in, err)
		}
	}
	if _, err := faultinject.ParseRules([]byte(`{`)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ParseRules(%q) = %v, want it to wrap io.ErrUnexpectedEOF", "{", err)
	}
}
