package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
)

func Example() {
	dir, _ := os.MkdirTemp("", "policies")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "policies.yaml")
	os.WriteFile(path, []byte(`
policies:
  payments:
    max_attempts: 4
    backoff: {strategy: full_jitter, base: 100ms, max: 5s}
    budget: {kind: ratio, preset: ten_percent}
operations:
  charge-card: payments
`), 0o644)

	reg := config.NewRegistry(config.Options{}) // a nil Logger is silent
	if err := reg.Reload(path); err != nil {
		fmt.Println(err)
		return
	}
	// In production: go reg.Watch(ctx, path, config.WatchOptions{}).
	h := reg.Policy("charge-card") // keep the handle
	err := retry.Run(context.Background(), h.Policy(), func(ctx context.Context) error { return nil })
	fmt.Println(h.Policy().MaxAttempts, h.Spec().Name, err)

	// A bad edit is rejected whole and the old policy keeps serving.
	os.WriteFile(path, []byte("policies: {payments: {max_attempts: 4, backoff: {max: 5x}}}\n"), 0o644)
	var bad *config.Error
	if errors.As(reg.Reload(path), &bad) {
		for _, p := range bad.Problems {
			fmt.Printf("line %d: %s: %s\n", p.Line, p.Path, p.Msg)
		}
	}
	fmt.Println(h.Policy().MaxAttempts)
	// Output:
	// 4 payments <nil>
	// line 1: policies.payments.backoff.max: "5x" is not a duration (use a number with a unit: 250ms, 2s, 1m)
	// 4
}
