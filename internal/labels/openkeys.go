package labels

import (
	"cmp"
	"slices"
	"strings"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
)

// OpenKey is one key of a breaker group named in the open-keys series.
type OpenKey struct {
	Key  string // a valid label value, never other
	Open bool
}

// OpenKeys ranks a breaker group's live keys for the bounded open-keys
// series of promretry and otelretry: open breakers first, then the keys
// with the most calls in their breaker's current state, then by key. It
// returns the first topN (every key with all) as label values (valid
// UTF-8; a key equal to other gets a trailing "_" so it is never merged
// into the sum of the rest) and the number of open breakers among the
// rest, the default and overflow members included.
func OpenKeys(g *keyed.Breakers, topN int, all bool, other string) (top []OpenKey, othersOpen int) {
	type traffic struct {
		key   string
		open  bool
		calls uint64
	}
	type member struct {
		key string
		b   *breaker.Breaker
	}
	// List the members under the group's lock, and read them after it:
	// State may move a breaker to half-open and run its listeners, which
	// may use the group.
	var ms []member
	g.Each(func(key string, b *breaker.Breaker) { ms = append(ms, member{key, b}) })
	ks := make([]traffic, 0, len(ms))
	for _, m := range ms {
		ks = append(ks, traffic{key: m.key, open: m.b.State() == breaker.Open, calls: m.b.Counts().Requests})
	}
	n := topN
	if all || n > len(ks) {
		n = len(ks)
	}
	slices.SortFunc(ks, func(a, b traffic) int {
		if a.open != b.open {
			if a.open {
				return -1
			}
			return 1
		}
		if a.calls != b.calls {
			return cmp.Compare(b.calls, a.calls)
		}
		return cmp.Compare(a.key, b.key)
	})
	for _, b := range []*breaker.Breaker{g.Default(), g.Overflow()} {
		if b.State() == breaker.Open {
			othersOpen++
		}
	}
	seen := make(map[string]struct{}, n)
	for i, k := range ks {
		key, fresh := "", false
		if i < n {
			key, fresh = KeyValue(k.key, other, seen)
		}
		if !fresh {
			if k.open {
				othersOpen++
			}
			continue
		}
		top = append(top, OpenKey{Key: key, Open: k.open})
	}
	return top, othersOpen
}

// KeyValue returns the label value of a group's key: invalid UTF-8
// replaced, and other (the label of the rest) given a trailing "_". Two
// keys can map to one value ("a\xff" and "a\xfe"; a key "other_" and a
// key "other"), and two series with the same labels fail the whole
// scrape, so fresh is false for a value already in seen (the caller then
// counts the key with the rest); a fresh value is added to seen.
func KeyValue(key, other string, seen map[string]struct{}) (value string, fresh bool) {
	value = strings.ToValidUTF8(key, "\uFFFD")
	if value == other {
		value = other + "_"
	}
	if _, dup := seen[value]; dup {
		return value, false
	}
	seen[value] = struct{}{}
	return value, true
}
