package config

import (
	"fmt"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// SharedStore builds breakers and budgets whose state is shared by every
// process of a fleet, for the policies whose breaker or budget block says
// shared: NAME, NAME being the store's key in Options.Shared. It uses only
// core types, so a store module (such as redisstore's Store) implements it
// without importing this package, and this package does not import it.
//
// Name is the policy's name (with ".nested" appended for its nested
// budget): processes whose files give a policy the same name share its
// state. The close function returned, if not nil, is called when a reload
// drops the part, when the file that asked for it is not applied, and by
// Registry.Close. A store's error refuses the file, naming the field, and
// the old policies keep serving.
//
// The Registry keeps a shared part across reloads while its settings
// (and store) are unchanged, so a reload neither reconnects nor forgets
// what the process has counted; a reload that changes them builds a new
// part under the same name, which joins the state the fleet keeps.
//
// A block that is also split per key (per: host or per: method) needs a
// store that is a KeyedSharedStore too.
type SharedStore interface {
	// SharedBreaker returns a breaker with the settings c (its Clock is
	// Options.Clock), shared under name.
	SharedBreaker(name string, c breaker.Config) (b retry.Breaker, close func(), err error)
	// SharedBudget returns a budget.Ratio-like token bucket with the
	// settings c, shared under name.
	SharedBudget(name string, c budget.RatioConfig) (b retry.Budget, close func(), err error)
}

// shared reads a shared key: the name of a store in Options.Shared.
func (d *decoder) shared(n *yaml.Node, path string) string {
	s, ok := d.scalar(n, path)
	if !ok {
		return ""
	}
	if s == "" || s == "false" || s == "true" {
		d.fail(n, path, "%q is not a store name: write the key of the store in config.Options.Shared, e.g. shared: redis", s)
		return ""
	}
	return s
}

// sharedStore returns the store a part asks for, or a file error naming
// field. It must be called with r.mu held.
func (r *Registry) sharedStore(file, field, name string) (SharedStore, error) {
	st, ok := r.opts.Shared[name]
	if !ok || st == nil {
		known := make([]string, 0, len(r.opts.Shared))
		for k := range r.opts.Shared {
			known = append(known, k)
		}
		return nil, &Error{[]Problem{{File: file, Path: field,
			Msg: fmt.Sprintf("store %q is not in config.Options.Shared (given: %v): the connection to a shared store is set in code, not in the file", name, sorted(known))}}}
	}
	return st, nil
}

// sharedError is a store's refusal of a part, as a file error.
func sharedError(file, field, store string, err error) error {
	return &Error{[]Problem{{File: file, Path: field, Msg: fmt.Sprintf("store %q refused it: %v", store, err)}}}
}
