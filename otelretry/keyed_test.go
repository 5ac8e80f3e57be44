package otelretry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

// TestAttemptSpanCarriesKey (#37 item 5): the attempt spans of a call
// whose context carries a key (keyed.WithKey, as the adapters set it)
// have the attribute stormguard.key; a call without one has none.
func TestAttemptSpanCarriesKey(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	p := &retry.Policy{Operation: "op", MaxAttempts: 1, Observer: h.obs}
	retry.Run(keyed.WithKey(context.Background(), "https://a:443"), p, func(context.Context) error { return nil })
	retry.Run(context.Background(), p, func(context.Context) error { return nil })
	var spans []sdktrace.ReadOnlySpan
	for _, sp := range h.spans.Ended() {
		for _, kv := range sp.Attributes() {
			if kv.Key == otelretry.AttrAttempt {
				spans = append(spans, sp)
			}
		}
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	get := func(i int) (string, bool) {
		for _, kv := range spans[i].Attributes() {
			if kv.Key == otelretry.AttrKey {
				return kv.Value.AsString(), true
			}
		}
		return "", false
	}
	if k, ok := get(0); !ok || k != "https://a:443" {
		t.Fatalf("keyed span: %q %v", k, ok)
	}
	if k, ok := get(1); ok {
		t.Fatalf("unkeyed span has key %q", k)
	}
}

// TestKeyedGroupGauges: a breaker group watched (through WatchBreaker, as
// a policy file's Registry does) reports members, and
// stormguard.breaker.open_keys for the top N keys and other only.
func TestKeyedGroupGauges(t *testing.T) {
	h := newHarness(t, otelretry.Config{KeyedTopN: 2})
	g, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: 1 << 40})
	for i := range 20 {
		done, _ := g.Get(fmt.Sprintf("k%02d", i)).Allow()
		done(nil)
	}
	for _, k := range []string{"bad1", "bad2", "bad3"} {
		done, _ := g.Get(k).Allow()
		done(errors.New("down"))
	}
	unwatch := h.obs.WatchBreaker("op", g)
	if v := h.value(t, "stormguard.keyed.members", op("op"), attribute.String("part", "breaker")); v != 23 {
		t.Fatalf("members %v", v)
	}
	m := h.metrics(t)["stormguard.breaker.open_keys"]
	if m.Name == "" {
		t.Fatal("no open_keys metric")
	}
	if v := h.value(t, "stormguard.breaker.open_keys", op("op"), attribute.String("key", "other")); v != 1 {
		t.Fatalf("other %v, want 1 (three open, two with their own series)", v)
	}
	if v := h.value(t, "stormguard.breaker.open_keys", op("op"), attribute.String("key", "bad1")); v != 1 {
		t.Fatalf("bad1 %v", v)
	}
	if _, ok := h.point(t, "stormguard.breaker.open_keys", op("op"), attribute.String("key", "k00")); ok {
		t.Fatal("a closed key outside the top N has a series")
	}
	unwatch()
	if _, ok := h.point(t, "stormguard.keyed.members", op("op")); ok {
		t.Fatal("members reported after unwatch")
	}
}
