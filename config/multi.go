package config

import "github.com/stormguard/stormguard/retry"

// eachObserver calls f for o, or, when o is a retry.Multi (it has
// Unwrap() []retry.Observer), for each of its members, recursively, so the
// optional interfaces config looks for are found inside a Multi. nil
// observers are skipped.
func eachObserver(o retry.Observer, f func(retry.Observer)) {
	if o == nil {
		return
	}
	if m, ok := o.(interface{ Unwrap() []retry.Observer }); ok {
		for _, c := range m.Unwrap() {
			eachObserver(c, f)
		}
		return
	}
	f(o)
}
