package awssdk

// HoldCounts is holdCounts, for the tests of package awssdk_test.
func HoldCounts() (held int, wrapped int64) { return holdCounts() }
