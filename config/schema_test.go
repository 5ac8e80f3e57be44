package config

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strconv"
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

// TestSchemaRefusesZeroDurations (third outside review): every duration
// property whose description says "0 is refused" refuses it in every
// spelling the decoder refuses ("0s", "0ms", "0h0m0s", not only "0"),
// through a "not" pattern, and still accepts positive durations.
func TestSchemaRefusesZeroDurations(t *testing.T) {
	data, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root any
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	found := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch o := v.(type) {
		case map[string]any:
			if d, _ := o["description"].(string); strings.Contains(d, "(0 is refused)") {
				if pat, ok := o["pattern"].(string); ok && strings.Contains(pat, "ns|us") {
					found++
					not, _ := o["not"].(map[string]any)
					np, _ := not["pattern"].(string)
					if np == "" {
						t.Errorf("%s: says 0 is refused but has no \"not\" pattern", path)
						return
					}
					accept, refuse := regexp.MustCompile(pat), regexp.MustCompile(np)
					for _, z := range []string{"0s", "0ms", "0h0m0s", "0.0s"} {
						if accept.MatchString(z) && !refuse.MatchString(z) {
							t.Errorf("%s: %q is accepted", path, z)
						}
					}
					for _, p := range []string{"1s", "1m30s", "0.5s", "100ms"} {
						if !accept.MatchString(p) || refuse.MatchString(p) {
							t.Errorf("%s: %q is refused", path, p)
						}
					}
				}
			}
			for k, x := range o {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range o {
				walk(path+"["+strconv.Itoa(i)+"]", x)
			}
		}
	}
	walk("schema", root)
	if found < 7 {
		t.Fatalf("found %d duration properties that refuse 0, want at least 7", found)
	}
}
