package labels

import (
	"cmp"
	"slices"
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
// delays are read after it is released. Keys become label values by
// KeyValue; a key whose value an earlier top key took counts with the
// rest.
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
		samples uint64
	}
	rs := make([]ranked, 0, len(ms))
	for _, m := range ms {
		if d, ok := m.a.Delay(); ok {
			rs = append(rs, ranked{KeyDelay{Key: m.key, Delay: d}, m.a.Samples()})
		}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.samples != b.samples {
			return cmp.Compare(b.samples, a.samples)
		}
		if a.Delay != b.Delay {
			return cmp.Compare(b.Delay, a.Delay)
		}
		return cmp.Compare(a.Key, b.Key)
	})
	n := topN
	if all || n > len(rs) {
		n = len(rs)
	}
	n = max(n, 0)
	var rest, every []time.Duration
	for _, a := range [...]*hedge.Adaptive{g.Default(), g.Overflow()} {
		if d, ok := a.Delay(); ok {
			rest = append(rest, d)
		}
	}
	every = append(every, rest...)
	seen := make(map[string]struct{}, n)
	for i, r := range rs {
		every = append(every, r.Delay)
		key, fresh := "", false
		if i < n {
			key, fresh = KeyValue(r.Key, other, seen)
		}
		if !fresh {
			rest = append(rest, r.Delay)
			continue
		}
		s.Top = append(s.Top, KeyDelay{Key: key, Delay: r.Delay})
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
