package otelretry

import "github.com/stormguard/stormguard/internal/labels"

// SharedPrefix starts the operation label of a limiter or breaker that
// several operations share: "_shared:" and the sorted labels of the
// operations sharing it, comma-separated (the first three, then "+N" for
// the N others). Such a part is exported once, under that label, and
// stormguard_limiter_info / stormguard_breaker_info join each operation
// to it.
const SharedPrefix = labels.SharedPrefix

// partKey is labels.PartKey: the identity by which watches of one limiter
// or breaker are found to share it.
func partKey(v any) any { return labels.PartKey(v) }

// partLabel is labels.PartLabel: the label a part watched under the
// operation labels labels is exported under.
func partLabel(ls []string) string { return labels.PartLabel(ls) }

// widest is the label a shared limiter had when the most operations
// watched it: its counts go there when it retires.
type widest struct {
	label string
	n     int
}
