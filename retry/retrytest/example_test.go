package retrytest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

func ExampleRecorder() {
	rec := new(retrytest.Recorder)
	policy := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: rec}
	calls := 0
	retry.Do(context.Background(), policy, func(context.Context) (int, error) {
		if calls++; calls == 1 {
			return 0, errors.New("unavailable")
		}
		return 42, nil
	})
	fmt.Println(rec)
	fmt.Println(len(rec.Retries()), rec.Calls()[0].Attempts)
	// Output:
	// start#1 end#1:error retry#2 start#2 end#2:success callend:success
	// 1 2
}
