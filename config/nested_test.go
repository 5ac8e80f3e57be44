package config

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// TestNestedRuleFromFile (issue #25 item 6): a policy's nested key sets
// retry.Policy.Nested, and rule budget builds Policy.NestedBudget from its
// budget spec; left out, the rule is one_layer (the core's safe default).
// A nested budget whose settings are unchanged survives a reload.
func TestNestedRuleFromFile(t *testing.T) {
	src := `
policies:
  plain: {max_attempts: 4, backoff: {strategy: constant, base: 0s}}
  inner: {max_attempts: 4, backoff: {strategy: constant, base: 0s}, nested: one_layer}
  edge: {max_attempts: 4, backoff: {strategy: constant, base: 0s}, nested: ignore}
  shared:
    max_attempts: 4
    backoff: {strategy: constant, base: 0s}
    nested:
      rule: budget
      budget: {kind: ratio, max_tokens: 2, initial_tokens: 2, retry_cost: 1, refill: 0.1}
`
	f := mustParse(t, src)
	want := map[string]retry.NestedRule{"plain": retry.NestedOneLayer, "inner": retry.NestedOneLayer, "edge": retry.NestedIgnore, "shared": retry.NestedBudget}
	for name, rule := range want {
		if got := f.Policies[name].Nested.Rule; got != rule {
			t.Errorf("%s: rule %v, want %v", name, got, rule)
		}
	}
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	shared := r.Policy("shared").Policy()
	if shared.Nested != retry.NestedBudget || shared.NestedBudget == nil {
		t.Fatalf("shared: Nested %v, NestedBudget %v", shared.Nested, shared.NestedBudget)
	}
	if _, ok := shared.NestedBudget.(*budget.Ratio); !ok || r.Policy("edge").Policy().NestedBudget != nil {
		t.Fatal("the nested budget is built only for rule budget, of its kind")
	}

	// Real calls made while serving a request whose caller retries.
	inbound := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	fail := errors.New("connection reset")
	attempts := func(name string) (int, error) {
		n := 0
		err := retry.Run(inbound, r.Policy(name).Policy(), func(context.Context) error { n++; return fail })
		return n, err
	}
	if n, err := attempts("plain"); n != 1 || !errors.Is(err, retry.ErrNestedRetry) {
		t.Errorf("plain (one_layer by default): %d attempts, %v; want 1 and ErrNestedRetry", n, err)
	}
	if n, err := attempts("edge"); n != 4 || !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Errorf("edge (ignore): %d attempts, %v; want 4", n, err)
	}
	if n, _ := attempts("shared"); n < 2 || n > 3 {
		t.Errorf("shared (budget of 2 tokens): %d attempts, want the budget's retries and no more", n)
	}

	// An unchanged nested budget is kept across a reload; a changed one is not.
	kept := shared.NestedBudget
	r.Apply(mustParse(t, src+"operations: {x: plain}\n"))
	if r.Policy("shared").Policy().NestedBudget != kept {
		t.Error("an unchanged nested budget was rebuilt")
	}
	r.Apply(mustParse(t, `
policies:
  plain: {}
  inner: {}
  edge: {}
  shared: {nested: {rule: budget, budget: {kind: concurrency}}}
operations: {x: plain}
`))
	if nb := r.Policy("shared").Policy().NestedBudget; nb == kept || nb == nil {
		t.Error("a changed nested budget was kept")
	}
}

// TestNestedMeshRetriesFromFile (issue #31 item 30): nested.mesh_retries
// declares that the service mesh in front of the server retries; a
// Handle's MeshRetries reads it from the file in force, so
// layer.WithMeshRetriesFrom(handle) follows a reload. A request that came
// through the mesh with x-envoy-attempt-count: 1 then counts as coming
// from a caller that retries, and a retry.Do made while serving it makes
// one attempt.
func TestNestedMeshRetriesFromFile(t *testing.T) {
	declared := `
policies:
  mesh: {max_attempts: 4, backoff: {strategy: constant, base: 0s}, nested: {rule: one_layer, mesh_retries: true}}
  plain: {max_attempts: 4, backoff: {strategy: constant, base: 0s}, nested: one_layer}
`
	f := mustParse(t, declared)
	if !f.Policies["mesh"].Nested.MeshRetries || f.Policies["plain"].Nested.MeshRetries {
		t.Fatalf("mesh_retries read as %v and %v, want true and false", f.Policies["mesh"].Nested.MeshRetries, f.Policies["plain"].Nested.MeshRetries)
	}
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("mesh")
	fail := errors.New("connection reset")
	var attempts int
	srv := layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		attempts = 0
		retry.Run(req.Context(), h.Policy(), func(context.Context) error { attempts++; return fail })
	}), layer.WithMeshRetriesFrom(h))
	serve := func() int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(layer.EnvoyAttemptCount, "1")
		srv.ServeHTTP(httptest.NewRecorder(), req)
		return attempts
	}
	if n := serve(); n != 1 {
		t.Errorf("behind a mesh declared to retry: %d attempts, want 1", n)
	}

	// A reload that withdraws the declaration holds from the next request.
	if err := r.Apply(mustParse(t, strings.Replace(declared, "mesh_retries: true", "mesh_retries: false", 1))); err != nil {
		t.Fatal(err)
	}
	if h.MeshRetries() {
		t.Error("MeshRetries still true after the reload")
	}
	if n := serve(); n != 4 {
		t.Errorf("behind a mesh no longer declared to retry: %d attempts, want 4", n)
	}
	if (&Handle{}).MeshRetries() {
		t.Error("a handle with no policy declares mesh retries")
	}
}

// A mesh_retries that is not a boolean, or a scalar rule with it, is
// refused with the file, line and field.
func TestNestedMeshRetriesRefused(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"not a boolean", `
policies:
  p:
    nested: {rule: one_layer, mesh_retries: maybe}
`, `test.yaml:4: policies.p.nested.mesh_retries: "maybe" is not true or false`},
		{"a list", `
policies:
  p:
    nested:
      rule: ignore
      mesh_retries: [true]
`, `test.yaml:6: policies.p.nested.mesh_retries: must be a value, not a list`},
		{"misspelt", `
policies:
  p:
    nested: {rule: one_layer, mesh_retry: true}
`, `test.yaml:4: policies.p.nested.mesh_retry: unknown field (known: budget, mesh_retries, rule)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(c.src))
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Error() != c.want {
				t.Errorf("Parse: %v\nwant: %s", err, c.want)
			}
		})
	}
}
