package labels

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
)

// KeyDelay is one key of a group of hedge delays named in the per-key
// delay series.
type KeyDelay struct {
	Key   string // a valid label value, never other
	Delay time.Duration
}

// DelaySummary is what promretry and otelretry export of a group of hedge
// delays (hedge.NewAdaptives), bounded whatever the keys.
type DelaySummary struct {
	// Keys is how many members (the live keys, the default and overflow
	// members) give a delay now (enough samples). Min, Median (the lower
	// median) and Max are over those, and zero when Keys is 0.
	Keys             int
	Min, Median, Max time.Duration
	// Top are the first topN keys (every key with all) with a delay,
	// the busiest first (hedge.Adaptive.Samples: the most attempts in the
	// window), then the longest delays, then by key.
	Top []KeyDelay
	// Other is the lower median delay of the members with a delay not in
	// Top (the default and overflow members included); OtherOK is false
	// when there are none.
	Other   time.Duration
	OtherOK bool
}

// HedgeDelays reads every member's delay (Adaptive.Delay) of g and
// summarises them. The members are listed under the group's lock; their
// delays are read after it is released. A key equal to other gets a
// trailing "_" and invalid UTF-8 is replaced, as in OpenKeys.
func HedgeDelays(g *keyed.Group[*hedge.Adaptive], topN int, all bool, other string) DelaySummary {
	type member struct {
		key string
		a   *hedge.Adaptive
	}
	var ms []member
	g.Each(func(key string, a *hedge.Adaptive) { ms = append(ms, member{key, a}) })
	var s DelaySummary
	type ranked struct {
		KeyDelay
		seen uint64
	}
	rs := make([]ranked, 0, len(ms))
	for _, m := range ms {
		if d, ok := m.a.Delay(); ok {
			rs = append(rs, ranked{KeyDelay{Key: m.key, Delay: d}, m.a.Samples()})
		}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.seen != b.seen {
			return cmp.Compare(b.seen, a.seen)
		}
		if a.Delay != b.Delay {
			return cmp.Compare(b.Delay, a.Delay)
		}
		return cmp.Compare(a.Key, b.Key)
	})
	ks := make([]KeyDelay, len(rs))
	for i, r := range rs {
		ks[i] = r.KeyDelay
	}
	n := topN
	if all || n > len(ks) {
		n = len(ks)
	}
	n = max(n, 0)
	var rest, every []time.Duration
	for _, a := range [...]*hedge.Adaptive{g.Default(), g.Overflow()} {
		if d, ok := a.Delay(); ok {
			rest = append(rest, d)
		}
	}
	every = append(every, rest...)
	for i, k := range ks {
		every = append(every, k.Delay)
		if i >= n {
			rest = append(rest, k.Delay)
			continue
		}
		key := strings.ToValidUTF8(k.Key, "\uFFFD")
		if key == other {
			key = other + "_"
		}
		s.Top = append(s.Top, KeyDelay{Key: key, Delay: k.Delay})
	}
	if len(every) > 0 {
		slices.Sort(every)
		s.Keys, s.Min, s.Median, s.Max = len(every), every[0], every[(len(every)-1)/2], every[len(every)-1]
	}
	if len(rest) > 0 {
		slices.Sort(rest)
		s.Other, s.OtherOK = rest[(len(rest)-1)/2], true
	}
	return s
}
