package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

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

	// Step 1, synchronous: a valid file or an error, never a registry
	// serving the zero Policy.
	reloads := make(chan error, 8)
	reg, err := config.Open(path, config.Options{ // a nil Logger is silent
		OnReload: func(_ string, err error) { reloads <- err },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-reloads
	// Step 2: follow edits. Watch returns its start error itself.
	w, err := reg.Watch(path, config.WatchOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	h := reg.Policy("charge-card") // keep the handle
	err = retry.Run(context.Background(), h.Policy(), func(ctx context.Context) error { return nil })
	fmt.Println(h.Policy().MaxAttempts, h.Spec().Name, err)

	// A bad edit (saved by rename, as editors do) is rejected whole and
	// the old policy keeps serving.
	os.WriteFile(path+".tmp", []byte("policies: {payments: {max_attempts: 4, backoff: {max: 5x}}}\n"), 0o644)
	os.Rename(path+".tmp", path)
	select {
	case err := <-reloads:
		var bad *config.Error
		if errors.As(err, &bad) {
			for _, p := range bad.Problems {
				fmt.Printf("line %d: %s: %s\n", p.Line, p.Path, p.Msg)
			}
		}
	case <-time.After(10 * time.Second):
		fmt.Println("no reload")
	}
	fmt.Println(h.Policy().MaxAttempts)
	// Output:
	// 4 payments <nil>
	// line 1: policies.payments.backoff.max: "5x" is not a duration (use a number with a unit: 250ms, 2s, 1m)
	// 4
}

// ExampleOpen shows the start refused: a missing or invalid file is an
// error and there is no Registry to serve from.
func ExampleOpen() {
	reg, err := config.Open(filepath.Join(os.TempDir(), "no-such-policies.yaml"), config.Options{})
	fmt.Println(reg == nil, errors.Is(err, os.ErrNotExist))
	// Output:
	// true true
}
