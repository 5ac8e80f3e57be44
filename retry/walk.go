package retry

// walk calls visit on err and every error it wraps, depth first in the
// order errors.Is uses, until visit returns true. Unlike errors.As it does
// not allocate, which keeps classification off the heap on the retry path.
func walk(err error, visit func(error) bool) bool {
	for err != nil {
		if visit(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, visit) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// Find reports whether match holds for err or any error it wraps, through
// both forms of Unwrap, in the order errors.Is searches. It is errors.Is
// for a predicate (an interface an error implements, a field it holds),
// and unlike errors.As it does not allocate.
func Find(err error, match func(error) bool) bool { return walk(err, match) }
