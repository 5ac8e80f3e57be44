package config_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/hedge"
)

// ExampleHandle_Hedger hedges the calls of an operation with the
// settings of its policy's hedge block.
func ExampleHandle_Hedger() {
	dir, _ := os.MkdirTemp("", "policies")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, []byte(`
policies:
  search:
    max_attempts: 3
    budget: {kind: ratio, preset: ten_percent}
    hedge: {delay: 50ms, max_hedges: 1, adaptive: {percentile: 0.95, window: 10s, floor: 5ms}}
operations:
  search.query: search
`), 0o644)
	reg, err := config.Open(path, config.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	h := reg.Policy("search.query")
	v, err := hedge.Do(ctx, h.Hedger(), func(ctx context.Context) (string, error) {
		return "result", nil // call the downstream here
	}, nil)
	fmt.Println(v, err, h.Hedger().Delay, h.Hedger().MaxHedges, h.Hedger().Adaptive != nil)
	// Output:
	// result <nil> 50ms 1 true
}
