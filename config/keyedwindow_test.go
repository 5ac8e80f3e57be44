package config

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/breaker"
)

// TestKeyedCountWindowMemoryIsBounded: each field of a keyed count-window
// breaker was checked alone, so calls × max_keys could ask for 160 TiB
// (calls 16777216, max_keys 10000000), every key's breaker allocating its
// whole window at its first call. Parse, and Apply of a File built in
// code, refuse a keyed count window beyond MaxKeyedWindowBytes, naming
// calls and max_keys; up to the bound it is accepted.
func TestKeyedCountWindowMemoryIsBounded(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"calls: 16777216, per: method, max_keys: 10000000", "policies.p.breaker.calls: calls 16777216 × max_keys 10000000 is 152.6 TiB of count windows"},
		{"calls: 1073742, per: host", "calls 1073742 × max_keys 1000 (the default, max_keys left out) is 1 GiB"},
		{"calls: 2048, per: host, max_keys: 1000000", "calls 2048 × max_keys 1000000 is 1.9 GiB"},
	} {
		_, err := Parse("p.yaml", []byte("policies:\n  p:\n    breaker: {kind: count_window, "+tc.block+"}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config.MaxKeyedWindowBytes") {
			t.Errorf("%s: %v, want %q", tc.block, err, tc.want)
		}
	}
	for _, block := range []string{
		"calls: 1073741, per: host",                 // just under 1 GiB
		"calls: 1024, per: host, max_keys: 1048576", // likewise
		"calls: 16777216",                           // one window, not per key
		"calls: 16777216, per: host, max_keys: 64",
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
