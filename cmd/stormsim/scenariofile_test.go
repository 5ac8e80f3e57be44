package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// fileWith is a small scenario file whose custom policies are custom.
func fileWith(custom string) []byte {
	return []byte(`name: own
clients: 5
arrival: {poisson: 2}
duration: 4s
drain: 2s
tiers:
  - {name: edge, workers: 50, service: exp(5ms)}
  - {name: api, workers: 10, service: exp(10ms), timeout: 500ms}
faults: [{kind: unavailable, tier: api, start: 1s, end: 2s}]
policies: [no-retry, ` + firstName(custom) + `]
custom:
` + custom)
}

func firstName(custom string) string {
	i := strings.Index(custom, "name: ")
	rest := custom[i+len("name: "):]
	return rest[:strings.IndexAny(rest, ",}\n")]
}

// Custom policies had no line in the policy legend under the tables.
func TestCustomPolicyHasALegendLine(t *testing.T) {
	sc, err := parseScenarioFile(fileWith("  - {name: mine, max_attempts: 2, budget: {kind: ratio}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.Run(context.Background(), sim.Options{Seed: 1, Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, l := range rep.PolicyLegend {
		if l[0] == "mine" {
			doc = l[1]
		}
	}
	for _, want := range []string{"2 attempts", "retry.DefaultBackoff", "ratio budget"} {
		if !strings.Contains(doc, want) {
			t.Errorf("legend line for mine %q lacks %q (legend %q)", doc, want, rep.PolicyLegend)
		}
	}
}

// A custom policy meant something other than the library does: no
// backoff was no wait (retry.Policy: DefaultBackoff), and max_elapsed
// alone was no attempt limit (a 1101.7x peak; a Policy's 0 means 3).
func TestCustomPolicyTakesTheLibrarysDefaults(t *testing.T) {
	h := fileHop{MaxElapsed: dur(10 * time.Second)}
	p, err := h.policy("x")
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxAttempts != retry.DefaultMaxAttempts {
		t.Errorf("max_elapsed alone: MaxAttempts %d, want retry.Policy's %d", p.MaxAttempts, retry.DefaultMaxAttempts)
	}
	if p.Backoff == nil {
		t.Fatal("no backoff: retries at once, want retry.DefaultBackoff")
	}
	b := p.Backoff(nil)
	for n := 1; n <= 8; n++ {
		want := retry.DefaultBackoff.Delay(n, 0) // full jitter: at most base·2^(n−1), capped
		if d := b.Delay(n, 0); d < 0 || d > 10*time.Second || (n == 1 && d > 100*time.Millisecond) {
			t.Errorf("retry %d waits %s (DefaultBackoff drew %s): want full jitter from 100ms, capped at 10s", n, d, want)
		}
	}
	if !p.LayerRule {
		t.Error("no nested: want the layer rule, retry.Policy's default NestedOneLayer")
	}
	// Unlimited attempts need a bound in time.
	if _, err := (&fileHop{MaxAttempts: -1}).policy("x"); err == nil {
		t.Error("max_attempts -1 without max_elapsed accepted: it retries forever")
	}
	if p, err := (&fileHop{MaxAttempts: -1, MaxElapsed: dur(time.Second)}).policy("x"); err != nil || p.MaxAttempts != 0 {
		t.Errorf("max_attempts -1: %+v, %v; want sim's 0 (no count limit)", p, err)
	}
}

// Hedging, limiters, the layer rule and the overload marker could not be
// written in a file. They take config's keys.
func TestCustomPolicyWritesHedgingLimitersAndTheLayerRule(t *testing.T) {
	sc, err := parseScenarioFile(fileWith(`  - {name: hedged, max_attempts: 3, hedge: {delay: 20ms, max_hedges: 1, adaptive: {percentile: 0.9, window: 5s}}}
  - {name: throttled, limiter: {kind: sre, k: 2, window: 10s}}
  - {name: aws, limiter: {kind: aws_adaptive, beta: 0.7}}
  - name: chain
    hops:
      - {max_attempts: 4, nested: ignore}
      - {max_attempts: 4, nested: one_layer, overload_marker: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hedged", "throttled", "aws", "chain"} {
		if !sc.KnownPolicy(name) {
			t.Errorf("scenario lacks %s", name)
		}
	}
	h := fileHop{MaxAttempts: 3, Hedge: &fileHedge{Delay: dur(20 * time.Millisecond), MaxHedges: 1, Adaptive: &fileAdaptive{Percentile: 0.9}}}
	p, err := h.policy("h")
	if err != nil || p.Hedge == nil || p.Hedge.Delay != 20*time.Millisecond || p.Hedge.MaxHedges != 1 || p.Hedge.Adaptive == nil || p.Hedge.Adaptive.Percentile != 0.9 {
		t.Errorf("hedge: %+v, %v", p.Hedge, err)
	}
	l, err := (&fileHop{Limiter: &fileLimiter{Kind: "sre", K: 2}}).policy("l")
	if err != nil || l.Limiter == nil {
		t.Errorf("limiter: %v", err)
	}
	n, err := (&fileHop{Nested: "ignore", OverloadMarker: true}).policy("n")
	if err != nil || n.LayerRule || !n.OverloadMarker {
		t.Errorf("nested ignore, overload_marker: %+v, %v", n, err)
	}
	// Refused as config refuses them, or as the simulator cannot model.
	for name, hop := range map[string]fileHop{
		"hedge beside a limiter": {Hedge: &fileHedge{Delay: dur(time.Millisecond)}, Limiter: &fileLimiter{Kind: "sre"}},
		"hedge without a delay":  {Hedge: &fileHedge{}},
		"too many hedges":        {MaxAttempts: 2, Hedge: &fileHedge{Delay: dur(time.Millisecond), MaxHedges: 2}},
		"limiter without kind":   {Limiter: &fileLimiter{}},
		"sre with aws fields":    {Limiter: &fileLimiter{Kind: "sre", Beta: 0.5}},
		"bad k":                  {Limiter: &fileLimiter{Kind: "sre", K: 0.5}},
		"nested budget":          {Nested: "budget"},
		"nested nonsense":        {Nested: "sideways"},
	} {
		if _, err := hop.policy("x"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// example.yaml's list of fault kinds lacked reply-loss and slow.
func TestExampleFileListsEveryFaultKind(t *testing.T) {
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "kind: capacity") {
			list = line
		}
	}
	for k := sim.FaultKind(0); ; k++ {
		name := k.String()
		if _, ok := sim.ParseFaultKind(name); !ok {
			break
		}
		if !strings.Contains(list, " "+name+",") && !strings.HasSuffix(list, " "+name) {
			t.Errorf("example.yaml's fault kinds %q lack %s", list, name)
		}
	}
	if _, err := parseScenarioFile(data); err != nil {
		t.Fatal(err)
	}
}
