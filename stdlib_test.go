package stormguard_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRootImportsOnlyStdlib checks the promise that the root module's
// packages (tests aside) depend on nothing outside the standard library.
func TestRootImportsOnlyStdlib(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/stormguard/stormguard" && !strings.HasPrefix(p, "github.com/stormguard/stormguard/") {
			t.Errorf("root module depends on %s", p)
		}
	}
}
