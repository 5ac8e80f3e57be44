package stormguard_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// corePackages are the mechanisms: they must not depend on any adapter.
var corePackages = []string{"admission", "backoff", "budget", "breaker", "clock", "keyed", "retry", "throttle"}

// adapterPackages are the root module's adapters. Every other module of
// the repository (promretry, otelretry, grpcretry, config, redisstore,
// awssdk, …) is an integration, and an adapter too.
var adapterPackages = []string{"httpretry", "grpcretry", "hedge", "layer", "awsretry"}

// TestCoreImportsNoAdapter checks the dependency rule of DESIGN.md: the
// mechanisms (backoff, budget, breaker, clock, retry, throttle and the
// packages below them, tests aside) import no adapter — no httpretry,
// grpcretry, hedge, layer or awsretry, and no package of another module.
// The facts an adapter knows (an HTTP status, a header, "throttle",
// "overload", an error code) reach them through retry's fact interfaces.
func TestCoreImportsNoAdapter(t *testing.T) {
	const mod = "github.com/stormguard/stormguard"
	args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Module.Path}}{{end}}"}
	for _, p := range corePackages {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		seen++
		pkg, module := f[0], f[1]
		if module != mod {
			t.Errorf("the core depends on %s, of module %s", pkg, module)
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		for _, a := range adapterPackages {
			if rel == a || strings.HasPrefix(rel, a+"/") {
				t.Errorf("the core depends on the adapter %s", pkg)
			}
		}
	}
	if seen < len(corePackages) {
		t.Fatalf("go list listed %d packages, fewer than the %d core packages:\n%s", seen, len(corePackages), out)
	}
}
