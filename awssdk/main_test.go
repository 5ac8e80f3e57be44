package awssdk

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the abandoned
// retry loops of TestAttemptOutlivingItsOperationIsRaceFree and its kin
// included.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
