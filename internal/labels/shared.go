package labels

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// SharedPrefix starts the operation label of a limiter or breaker that
// several operations share: "_shared:" and the sorted labels of the
// operations sharing it, comma-separated (the first three, then "+N" for
// the N others). promretry and otelretry export such a part once, under
// that label.
const SharedPrefix = "_shared:"

// maxSharedNames bounds the operation names a shared label lists.
const maxSharedNames = 3

// PartKey returns the identity by which watches of one limiter or breaker
// are found to share it: the value itself when its type can be compared
// (a pointer, as every stormguard type is), else nil (never shared).
func PartKey(v any) any {
	if v == nil || !reflect.TypeOf(v).Comparable() {
		return nil
	}
	return v
}

// PartLabel returns the label a part watched under the operation labels
// labels (one per watching operation, repeats allowed) is exported under:
// the one label when all are the same, else the shared label.
func PartLabel(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	set := slices.Clone(labels)
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) == 1 {
		return set[0]
	}
	var b strings.Builder
	b.WriteString(SharedPrefix)
	for i, l := range set[:min(len(set), maxSharedNames)] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l)
	}
	if n := len(set) - maxSharedNames; n > 0 {
		b.WriteString(",+")
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}
