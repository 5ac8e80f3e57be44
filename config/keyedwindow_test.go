package config

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
)

// TestKeyedCountWindowMemoryIsBounded: each field of a keyed count-window
// breaker was checked alone, so calls × max_keys could ask for 160 TiB
// (calls 16777216, max_keys 10000000), every key's breaker allocating its
// whole window at its first call. Parse, and Apply of a File built in
// code, refuse a keyed count window beyond MaxKeyedWindowBytes, naming
// calls and max_keys; up to the bound it is accepted. The bound counts
// max_keys + 2 windows: the group builds its default and overflow
// members too.
func TestKeyedCountWindowMemoryIsBounded(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"calls: 16777216, per: method, max_keys: 10000000", "policies.p.breaker.calls: calls 16777216 × (max_keys 10000000 + 2, the group's default and overflow members) is 152.6 TiB of count windows"},
		{"calls: 1071599, per: host", "calls 1071599 × (max_keys 1000 (the default, max_keys left out) + 2, the group's default and overflow members) is 1 GiB"},
		{"calls: 2048, per: host, max_keys: 1000000", "calls 2048 × (max_keys 1000000 + 2, the group's default and overflow members) is 1.9 GiB"},
	} {
		_, err := Parse("p.yaml", []byte("policies:\n  p:\n    breaker: {kind: count_window, "+tc.block+"}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config.MaxKeyedWindowBytes") {
			t.Errorf("%s: %v, want %q", tc.block, err, tc.want)
		}
	}
	for _, block := range []string{
		"calls: 1071598, per: host",                 // 1002 windows just under 1 GiB
		"calls: 1024, per: host, max_keys: 1048574", // 1 GiB exactly
		"calls: 16777216",                           // one window, not per key
		"calls: 16777216, per: host, max_keys: 62",
	} {
		if _, err := Parse("p.yaml", []byte("policies:\n  p:\n    breaker: {kind: count_window, "+block+"}\n")); err != nil {
			t.Errorf("%s: %v", block, err)
		}
	}
	f := &File{Policies: map[string]*PolicySpec{"p": {Breaker: &BreakerSpec{Kind: "count_window",
		Config: breaker.Config{Window: breaker.Window{Calls: 1 << 24}}, Keys: &KeySpec{Per: PerHost, MaxKeys: 10_000_000}}}}}
	_, err := applyCodeBuilt(t, f)
	var fe *Error
	if !errors.As(err, &fe) || fe.Problems[0].Path != "policies.p.breaker.calls" {
		t.Fatalf("Apply of a code-built keyed window of 160 TiB = %v, want a *config.Error at policies.p.breaker.calls", err)
	}
}

// TestCountWindowCallBytes checks countWindowCallBytes against the
// breaker package: a count window of n calls allocates n bytes (and a
// little more for the breaker itself). The least of five measurements is
// taken, so that an allocation of another goroutine cannot count.
func TestCountWindowCallBytes(t *testing.T) {
	const calls = 1 << 20
	got := ^uint64(0)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b := breaker.New(breaker.Config{Window: breaker.Window{Calls: calls}})
		runtime.ReadMemStats(&after)
		b.Close()
		got = min(got, after.TotalAlloc-before.TotalAlloc)
	}
	if want := uint64(calls * countWindowCallBytes); got < want || got > want+64<<10 {
		t.Fatalf("a count window of %d calls allocated %d bytes, want %d (+ at most 64 KiB)", calls, got, want)
	}
}

// TestKeyedTimeWindowMemoryIsBounded: MaxKeyedWindowBytes bounded only
// count windows, and its message advised a time_window; but a time window
// holds 32 bytes per bucket from a breaker's first call, so buckets 4096
// with max_keys 1000000 (125 GiB) was accepted while a count window of
// 1.9 GiB was refused. Parse and Apply refuse a keyed time window beyond
// the bound too, naming buckets (the default 10 when left out) and
// max_keys; up to it, it is accepted.
func TestKeyedTimeWindowMemoryIsBounded(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"buckets: 4096, per: host, max_keys: 1000000", "policies.p.breaker.buckets: buckets 4096 × (max_keys 1000000 + 2, the group's default and overflow members) is 122.1 GiB of time windows"},
		{"per: host, max_keys: 10000000", "buckets 10 (the default, buckets left out) × (max_keys 10000000 + 2, the group's default and overflow members) is 3 GiB of time windows"},
		{"buckets: 4096, per: method, max_keys: 8191", "buckets 4096 × (max_keys 8191 + 2"},
	} {
		_, err := Parse("p.yaml", []byte("policies:\n  p:\n    breaker: {kind: time_window, window: 1m, "+tc.block+"}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "lower buckets or max_keys") {
			t.Errorf("%s: %v, want %q", tc.block, err, tc.want)
		}
	}
	for _, block := range []string{
		"buckets: 4096, per: host, max_keys: 8190", // 1 GiB exactly
		"per: host, max_keys: 3355441",             // 10 buckets, just under
		"buckets: 4096",                            // one window, not per key
	} {
		if _, err := Parse("p.yaml", []byte("policies:\n  p:\n    breaker: {kind: time_window, window: 1m, "+block+"}\n")); err != nil {
			t.Errorf("%s: %v", block, err)
		}
	}
	f := &File{Policies: map[string]*PolicySpec{"p": {Breaker: &BreakerSpec{Kind: "time_window",
		Config: breaker.Config{Window: breaker.Window{Duration: time.Minute, Buckets: 4096}}, Keys: &KeySpec{Per: PerHost, MaxKeys: 1_000_000}}}}}
	_, err := applyCodeBuilt(t, f)
	var fe *Error
	if !errors.As(err, &fe) || fe.Problems[0].Path != "policies.p.breaker.buckets" {
		t.Fatalf("Apply of a code-built keyed time window of 125 GiB = %v, want a *config.Error at policies.p.breaker.buckets", err)
	}
}

// TestTimeWindowBucketBytes checks timeWindowBucketBytes against the
// breaker package: a time window of n buckets allocates n × 32 bytes (and
// a little more for the breaker itself), the least of five measurements.
func TestTimeWindowBucketBytes(t *testing.T) {
	const buckets = 4096
	got := ^uint64(0)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b := breaker.New(breaker.Config{Window: breaker.Window{Duration: time.Minute, Buckets: buckets}})
		runtime.ReadMemStats(&after)
		b.Close()
		got = min(got, after.TotalAlloc-before.TotalAlloc)
	}
	if want := uint64(buckets * timeWindowBucketBytes); got < want || got > want+64<<10 {
		t.Fatalf("a time window of %d buckets allocated %d bytes, want %d (+ at most 64 KiB)", buckets, got, want)
	}
}
