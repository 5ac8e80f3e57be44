package config

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestSchemaMatchesDecoder keeps schema.json and the decoder's field lists
// in step: every field the decoder accepts is in the schema and vice versa.
func TestSchemaMatchesDecoder(t *testing.T) {
	data, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	props := func(o any) []string {
		var out []string
		for k := range o.(map[string]any)["properties"].(map[string]any) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	get := func(o any, path ...string) any {
		for _, p := range path {
			o = o.(map[string]any)[p]
		}
		return o
	}
	policy := get(s, "properties", "policies", "additionalProperties")
	check := func(what string, got []string, want []string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(sorted(want), ",") {
			t.Errorf("%s: schema has %v, decoder accepts %v", what, got, sorted(want))
		}
	}
	check("policy", props(policy), policyFields)
	check("backoff", props(get(policy, "properties", "backoff")), []string{"strategy", "base", "max", "step", "multiplier", "jitter", "factor"})
	for i, kind := range []string{"ratio", "window", "concurrency"} {
		check("budget "+kind, props(get(policy, "properties", "budget", "oneOf").([]any)[i]), budgetFields[kind])
	}
	nested := get(policy, "properties", "nested", "oneOf").([]any)[1]
	check("nested", props(nested), nestedFields)
	for i, kind := range []string{"ratio", "window", "concurrency"} {
		check("nested budget "+kind, props(get(nested, "properties", "budget", "oneOf").([]any)[i]), budgetFields[kind])
	}
	check("hedge", props(get(policy, "properties", "hedge")), hedgeFields)
	check("hedge adaptive", props(get(policy, "properties", "hedge", "properties", "adaptive")), adaptiveFields)
	for i, kind := range []string{LimiterSRE, LimiterAWSAdaptive} {
		check("limiter "+kind, props(get(policy, "properties", "limiter", "oneOf").([]any)[i]), limiterFields[kind])
	}
	for i, kind := range []string{"consecutive", "count_window", "time_window"} {
		check("breaker "+kind, props(get(policy, "properties", "breaker", "oneOf").([]any)[i]), breakerFields[kind])
	}
}
